package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// WriteJSON writes the report as one indented JSON object (schema
// vramscope.report/v1, docs/report.md) with every step the store holds.
// It writes a process at a time, in pieces, and its step table itself
// (appendSteps): encoding/json builds its whole output in memory, twice
// with indentation, and a report of 64 busy ranks is 430 MB of JSON.
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
	if err := r.writeProcesses(bw); err != nil {
		return err
	}
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}

// writeProcesses writes the processes, ",\n    " between them. A goroutine
// writes what is encoded while the rest is built and encoded, two buffers
// of about flushAt bytes taking turns; the first failed write stops the
// building.
func (r *Report) writeProcesses(w io.Writer) error {
	pw := newProcessWriter("    ")
	full := make(chan []byte, 1)
	free := make(chan []byte, 2)
	free <- nil
	free <- nil
	failed := make(chan struct{})
	var werr error // the writer's, read once failed is closed or the writer is done
	written := make(chan struct{})
	go func() {
		defer close(written)
		for b := range full {
			if werr == nil {
				if _, werr = w.Write(b); werr != nil {
					close(failed)
				}
			}
			free <- b[:0]
		}
	}()
	// flush hands b to the writer and takes the free buffer; false once a
	// write failed.
	flush := func(b []byte) ([]byte, bool) {
		full <- b
		select {
		case <-failed:
			return nil, false
		default:
		}
		select {
		case b = <-free:
			return b, true
		case <-failed:
			return nil, false
		}
	}
	b, first := <-free, true
	err := r.eachProcess(func(p *Process) error {
		if !first {
			b = append(b, ",\n    "...)
		}
		first = false
		var err error
		b, err = pw.append(b, p, func(b []byte) []byte {
			b, _ = flush(b) // a failed write stops the next process
			return b
		})
		if err != nil {
			return err
		}
		var ok bool
		if b, ok = flush(b); !ok {
			return errWriteFailed
		}
		return nil
	})
	close(full)
	<-written
	if werr != nil {
		return werr
	}
	return err
}

// errWriteFailed stops the building of processes once a write failed; the
// write's own error is reported.
var errWriteFailed = errors.New("write failed")

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
