package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/vramscope/vramscope/session"
)

// The step table is nearly all of a report's JSON (64 busy ranks: 430 MB
// of it). encoding/json writes it compact through reflection and a
// MarshalJSON call (an allocation) per byte figure, then indents it in a
// second pass; appendSteps writes the same bytes directly, in one pass.
// The field names and their order are Step's and Phase's json tags; a test
// compares appendSteps with encoding/json on every fixture and on steps
// whose every field is set.

// appendSteps appends steps as an indented encoder (SetIndent(prefix, "  "),
// SetEscapeHTML(false)) writes them where the line of their key begins with
// ind. Every time must be finite (finiteTimes): encoding/json refuses a NaN
// or an infinity. When flush is not nil, it is handed b whenever b holds
// flushAt bytes, between steps, and returns the buffer to go on with.
func appendSteps(b []byte, steps []Step, ind string, flush func([]byte) []byte) []byte {
	if steps == nil {
		return append(b, "null"...)
	}
	if len(steps) == 0 {
		return append(b, "[]"...)
	}
	// The indentation of each depth below the key: a step's braces, its
	// fields, a phase's braces, a phase's fields.
	var pad [4]string
	for i := range pad {
		pad[i] = ind + "                "[:2*(i+1)]
	}
	b = append(b, '[')
	for i := range steps {
		s := &steps[i]
		if i > 0 {
			b = append(b, ',')
			if flush != nil && len(b) >= flushAt {
				b = flush(b)
			}
		}
		b = append(b, '\n')
		b = append(b, pad[0]...)
		b = append(b, '{')
		f := pad[1]
		b = appendKey(b, f, "step", true)
		b = strconv.AppendInt(b, int64(s.Step), 10)
		b = appendKey(b, f, "start_s", false)
		b = appendFloat(b, s.StartS)
		b = appendKey(b, f, "end_s", false)
		b = appendFloat(b, s.EndS)
		b = appendKey(b, f, "micro", false)
		b = strconv.AppendInt(b, int64(s.Micro), 10)
		if s.Model != "" {
			b = appendKey(b, f, "model", false)
			b = appendString(b, s.Model)
		}
		b = appendKey(b, f, "phases", false)
		b = appendPhases(b, s.Phases, pad[2], pad[3])
		b = appendKey(b, f, "peak_allocated", false)
		b = appendBytes(b, s.PeakAllocated)
		b = appendKey(b, f, "peak_known", false)
		b = appendString(b, s.Peak.String())
		b = appendKey(b, f, "same_as", false)
		b = strconv.AppendInt(b, int64(s.SameAs), 10)
		b = appendKey(b, f, "within", false)
		b = appendBytes(b, s.Within)
		b = appendKey(b, f, "held", false)
		b = appendBytes(b, s.Held)
		b = appendKey(b, f, "plain", false)
		b = strconv.AppendBool(b, s.Plain)
		b = appendKey(b, f, "moved", false)
		b = strconv.AppendBool(b, s.Moved)
		b = appendKey(b, f, "skipped", false)
		b = strconv.AppendBool(b, s.Skipped)
		b = appendKey(b, f, "failed", false)
		b = appendString(b, s.Failed)
		b = append(b, '\n')
		b = append(b, pad[0]...)
		b = append(b, '}')
	}
	b = append(b, '\n')
	b = append(b, ind...)
	return append(b, ']')
}

// flushAt is how much of a process's JSON appendSteps holds before it hands
// it on: a busy rank's is 7 MB, and two such buffers raised report's
// resident memory by 15 MB.
const flushAt = 256 << 10

// finiteTimes reports whether every time of steps is finite, as appendSteps
// needs.
func finiteTimes(steps []Step) bool {
	finite := func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
	for i := range steps {
		s := &steps[i]
		if !finite(s.StartS) || !finite(s.EndS) {
			return false
		}
		for j := range s.Phases {
			if p := &s.Phases[j]; !finite(p.StartS) || !finite(p.EndS) || !finite(p.DurationS) {
				return false
			}
		}
	}
	return true
}

// appendPhases appends a step's phases, each brace on a line beginning with
// open and each field on one beginning with field.
func appendPhases(b []byte, phases []Phase, open, f string) []byte {
	if phases == nil {
		return append(b, "null"...)
	}
	if len(phases) == 0 {
		return append(b, "[]"...)
	}
	b = append(b, '[')
	for i := range phases {
		p := &phases[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '\n')
		b = append(b, open...)
		b = append(b, '{')
		b = appendKey(b, f, "phase", true)
		b = appendString(b, p.Phase)
		b = appendKey(b, f, "user", false)
		b = strconv.AppendBool(b, p.User)
		b = appendKey(b, f, "count", false)
		b = strconv.AppendInt(b, int64(p.Count), 10)
		for _, t := range [...]struct {
			key string
			v   float64
		}{{"start_s", p.StartS}, {"end_s", p.EndS}, {"duration_s", p.DurationS}} {
			b = appendKey(b, f, t.key, false)
			b = appendFloat(b, t.v)
		}
		b = appendKey(b, f, "allocated_end", false)
		b = appendBytes(b, p.AllocatedEnd)
		b = appendKey(b, f, "max_allocated_end", false)
		b = appendBytes(b, p.MaxAllocatedEnd)
		b = appendKey(b, f, "reserved_end", false)
		b = appendBytes(b, p.ReservedEnd)
		b = appendKey(b, f, "peak_allocated", false)
		b = appendBytes(b, p.PeakAllocated)
		b = appendKey(b, f, "peak_reserved", false)
		b = appendBytes(b, p.PeakReserved)
		b = appendKey(b, f, "peak_exact", false)
		b = strconv.AppendBool(b, p.PeakExact)
		b = appendKey(b, f, "peak_inferred", false)
		b = strconv.AppendBool(b, p.PeakInferred)
		b = appendKey(b, f, "read", false)
		b = strconv.AppendBool(b, p.Read)
		b = appendKey(b, f, "nvml_peak", false)
		b = appendBytes(b, p.NVMLPeak)
		b = appendKey(b, f, "non_pytorch", false)
		b = appendBytes(b, p.NonPyTorch)
		b = appendKey(b, f, "nvml_stale", false)
		b = strconv.AppendBool(b, p.NVMLStale)
		b = append(b, '\n')
		b = append(b, open...)
		b = append(b, '}')
	}
	b = append(b, '\n')
	b = append(b, open[:len(open)-2]...)
	return append(b, ']')
}

// appendKey begins an object's field: a comma unless it is the first, a
// new line beginning with ind, the quoted key (plain ASCII) and ": ".
func appendKey(b []byte, ind, key string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '\n')
	b = append(b, ind...)
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':', ' ')
}

// appendBytes appends a byte figure as session.Bytes.MarshalJSON writes it.
func appendBytes(b []byte, v session.Bytes) []byte {
	if !v.Known() {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// appendFloat appends a finite f as encoding/json writes a float64: the
// shortest decimal that reads back as f, in exponent form below 1e-6 or
// from 1e21, with the exponent's leading zero dropped.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString appends s quoted. Printable ASCII without a quote or a
// backslash (every phase name and model of a well-behaved hook) is written
// as it is; anything else is left to encoding/json, for its escapes.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// processWriter appends processes as an indented encoder with prefix
// prefix writes them, without the newline that ends each value: the
// fields but the steps by encoding/json, the steps by appendSteps.
type processWriter struct {
	prefix string
	// rest encodes a process without its steps into restBuf.
	rest    *json.Encoder
	restBuf bytes.Buffer
	// marker is the steps' field of a process without steps: a line to
	// itself, the only one at its depth with that key.
	marker []byte
}

func newProcessWriter(prefix string) *processWriter {
	pw := &processWriter{prefix: prefix}
	pw.rest = indentedEncoder(&pw.restBuf, prefix)
	pw.marker = []byte("\n" + prefix + "  \"steps\": null,")
	return pw
}

// append appends p to b, handing b to flush (when not nil) as appendSteps
// does.
func (pw *processWriter) append(b []byte, p *Process, flush func([]byte) []byte) ([]byte, error) {
	q := *p
	q.Steps = nil
	pw.restBuf.Reset()
	if err := pw.rest.Encode(&q); err != nil {
		return b, err
	}
	rest := bytes.TrimSuffix(pw.restBuf.Bytes(), []byte("\n"))
	if at := bytes.Index(rest, pw.marker); at >= 0 && finiteTimes(p.Steps) {
		cut := at + len(pw.marker) - len("null,")
		b = appendSteps(append(b, rest[:cut]...), p.Steps, pw.prefix+"  ", flush)
		return append(b, rest[cut+len("null"):]...), nil
	}
	whole := bytes.NewBuffer(b)
	if err := indentedEncoder(whole, pw.prefix).Encode(p); err != nil {
		return b, err
	}
	return bytes.TrimSuffix(whole.Bytes(), []byte("\n")), nil
}
