package session

import (
	"testing"
	"unsafe"
)

// A live store holds a fast process in bounded memory: a table of 300
// steps, 1,000 step summaries, 1,024 spans, 1,024 raw points a series,
// without losing a count or the session's peak.
func TestLiveBoundsHoldAFastProcess(t *testing.T) {
	st := New(WithLiveBounds())
	f := newFeed(1, "fast")
	const steps = 30000
	for s := range steps {
		peak := int64(200 + s%7)
		if s == 500 {
			peak = 9000
		}
		f.phase("forward", s, 0, 0.0005, mem(100, 100, 300), mem(150, peak, 300))
		f.phase("step", s, 0, 0.0005, mem(150, 150, 300), mem(150, 150, 300))
	}
	st.ApplyAll(f.evs)
	p := st.Process("fast")
	if n := len(p.Steps()); n > liveSteps+liveSteps/10 {
		t.Errorf("%d table rows, want at most %d", n, liveSteps+liveSteps/10)
	}
	pk := p.StepPeaks()
	if n, c := len(pk), cap(pk); n > livePeaks+livePeaks/10 || c > livePeaks+livePeaks/10+1 {
		t.Errorf("%d step summaries in room for %d, want at most %d", n, c, livePeaks+livePeaks/10+1)
	}
	if pk[0].Index != 0 || pk[len(pk)-1].Index != steps-1 {
		t.Errorf("summaries span steps %d..%d, want the first and the newest", pk[0].Index, pk[len(pk)-1].Index)
	}
	if n := len(p.Spans()); n > liveSpans {
		t.Errorf("%d spans, want at most %d", n, liveSpans)
	}
	if n := p.StepCount(); n != steps {
		t.Errorf("StepCount %d, want %d", n, steps)
	}
	for name, s := range map[string]*Series{"allocated": p.Allocated, "max_allocated": p.MaxAllocated} {
		if b := cap(s.raw) * int(unsafe.Sizeof(point{})); b > 64<<10 {
			t.Errorf("%s holds %d bytes of raw points", name, b)
		}
	}
	if p.MaxAllocated.Max() != mib(9000) {
		t.Errorf("session max_allocated %d MiB, want 9000", p.MaxAllocated.Max()/MiB)
	}
}
