package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report as one indented JSON object (schema
// vramscope.report/v1, docs/report.md) with every step the store holds.
// It writes one process at a time: encoding/json builds its whole output
// in memory, twice with indentation, and a report of 64 busy ranks is
// 430 MB of JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	if err := r.writeJSON(w); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}

// processesTail is how the report's last field reads when it is null:
// Processes is the last field of Report.
const processesTail = "\"processes\": null\n}\n"

func (r *Report) writeJSON(w io.Writer) error {
	var buf bytes.Buffer
	head := *r
	head.Processes = nil
	if err := encodeIndented(&buf, &head, ""); err != nil {
		return err
	}
	if r.processCount() == 0 || !bytes.HasSuffix(buf.Bytes(), []byte(processesTail)) {
		return encodeIndented(w, r, "")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(buf.Bytes()[:buf.Len()-len(processesTail)])
	bw.WriteString("\"processes\": [\n    ")
	first := true
	// One encoder for every process: its indentation buffer (7 MB for a
	// busy rank) is reused, and it writes straight to bw.
	enc := indentedEncoder(valueWriter{bw}, "    ")
	err := r.eachProcess(func(p *Process) error {
		if !first {
			bw.WriteString(",\n    ")
		}
		first = false
		return enc.Encode(p)
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}

// valueWriter writes what a json.Encoder writes without the newline that
// ends each value (the encoder writes a value in one Write).
type valueWriter struct{ w io.Writer }

func (v valueWriter) Write(b []byte) (int, error) {
	if _, err := v.w.Write(bytes.TrimSuffix(b, []byte("\n"))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// encodeIndented writes v as the report's JSON does, each line after the
// first beginning with prefix (the depth v is written at).
func encodeIndented(w io.Writer, v any, prefix string) error {
	return indentedEncoder(w, prefix).Encode(v)
}

// indentedEncoder is the encoder of encodeIndented.
func indentedEncoder(w io.Writer, prefix string) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent(prefix, "  ")
	enc.SetEscapeHTML(false)
	return enc
}

// WriteJSON writes the job view as one indented JSON object (schema
// vramscope.job-report/v1, docs/report.md): one row a rank, so it is
// written whole.
func (v *JobView) WriteJSON(w io.Writer) error {
	if err := encodeIndented(w, v, ""); err != nil {
		return fmt.Errorf("write JSON job report: %w", err)
	}
	return nil
}
