// Package csv writes the step × phase table of a session.Store as CSV: one
// row per process, step and phase, byte values in bytes and times in
// seconds, with a header row and nothing else, so that pandas.read_csv (or
// any spreadsheet) reads it with no options. docs/export.md lists the
// columns.
package csv

import (
	stdcsv "encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Columns is the header row, in order.
var Columns = []string{
	"session", "host", "pid", "rank", "device",
	"step", "model", "phase", "user", "count", "micro",
	"start_s", "end_s", "duration_s",
	"allocated_end", "max_allocated_end", "reserved_end",
	"peak_allocated", "peak_reserved", "peak_exact",
	"nvml_peak", "non_pytorch_peak", "read",
}

// Write writes the header and one row per step and phase of every process,
// in the order the phases began. Times are seconds from the session's
// start; an unknown value (no CUDA, no NVML, no rank) is an empty field.
// Text from the hook (session, host, model, phase) goes through text: no
// control byte reaches whoever cats the file, and no cell is a formula.
// model is the step's watch name (docs/hook.md, "Several models"), empty
// from hooks that name none.
func Write(w io.Writer, s *session.Store) error {
	cw := stdcsv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	t0 := s.Start()
	row := make([]string, len(Columns))
	for _, p := range s.ByRank() {
		h := &p.Hello
		rank, device := "", ""
		if h.Rank != nil {
			rank = strconv.Itoa(*h.Rank)
		}
		if h.CUDA != nil {
			device = "cuda:" + strconv.Itoa(h.CUDA.Index)
		} else {
			device = text(ipc.SourceKind(h)) // cpu, mps, xpu; "" from older hooks
		}
		for _, st := range p.Steps() {
			for i := range st.Phases {
				c := &st.Phases[i]
				row = append(row[:0], text(p.Key), text(h.Host), strconv.Itoa(h.PID), rank, device,
					strconv.Itoa(st.Index), text(st.Model), text(c.Name), strconv.FormatBool(c.User), strconv.Itoa(c.Count), strconv.Itoa(st.Micro),
					seconds(c.Start.Sub(t0)), seconds(c.End.Sub(t0)), seconds(c.Busy),
					bytes(c.AllocatedEnd), bytes(c.MaxAllocatedEnd), bytes(c.ReservedEnd),
					bytes(c.PeakAllocated), bytes(c.PeakReserved), strconv.FormatBool(c.Exact),
					bytes(c.PeakGPU), bytes(c.PeakNonPyTorch), strconv.FormatBool(c.Read))
				if err := cw.Write(row); err != nil {
					return fmt.Errorf("write csv: %w", err)
				}
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// seconds prints a duration in seconds to the microsecond (the hook's
// clock resolution).
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
}

func bytes(b session.Bytes) string {
	if !b.Known() {
		return ""
	}
	return strconv.FormatInt(int64(b), 10)
}

// text is a cell of the hook's text: escaped by textesc, and with a single
// quote before a first character that makes a spreadsheet read a formula
// (=, +, -, @, a tab or a carriage return), as OWASP recommends for CSV.
func text(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		s = "'" + s
	}
	return textesc.String(s)
}
