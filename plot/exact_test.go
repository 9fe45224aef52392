package plot_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/plot"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// With a hook that resets its counters at each read, a lost message took
// its interval's peak with it: the annotation says the peak is a lower
// bound. s001's stream, its hello marked exact_peaks and one phase end of
// step 3 lost.
func TestPlotPeakIsABoundAfterLostReads(t *testing.T) {
	r, err := record.Open("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := session.New()
	dropped := false
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := ev.Msg; m != nil {
			if m.Type == ipc.TypeHello && m.Hook != nil {
				h := *m.Hook
				h.ExactPeaks = true
				m.Hook = &h
			}
			if !dropped && m.Type == ipc.TypePhase && m.Step == 3 && m.Edge == ipc.EdgeEnd {
				dropped = true
				continue
			}
		}
		s.Apply(ev)
	}
	p := s.Processes()[0]
	if p.Lost == 0 {
		t.Fatal("no message counted lost")
	}
	var buf bytes.Buffer
	if err := plot.Write(&buf, "svg", s, p, plot.Options{Source: "s001"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "peak ≥ 4.21 GiB (not exact: messages lost)") {
		t.Fatalf("the peak annotation states a bound as the peak")
	}
}
