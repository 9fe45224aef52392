package session

import (
	"testing"
)

// `demo --headless --steps 20000` reported "totals:
// 10991 steps": the totals read the bounded summaries. 20,000 steps whose
// highest peak falls in the middle (dropped from the summaries) count in
// full, with that peak.
func TestTotalsCoverEveryStep(t *testing.T) {
	f := newFeed(1, "s1")
	for step := 0; step < 20000; step++ {
		peak := int64(100 + step%7)
		if step == 9000 {
			peak = 5000
		}
		// A training step (a forward alone would count as evaluation).
		f.phase("forward", step, 0, 0.01, mem(1, 1, 1), mem(1, 1, 1))
		f.phase("backward", step, 0, 0.01, mem(1, 1, 1), mem(peak, peak, peak+10))
	}
	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	if len(p.StepPeaks()) >= 20000 {
		t.Fatalf("the summaries were not bounded (%d): this test proves nothing", len(p.StepPeaks()))
	}
	if n := p.StepCount(); n != 20000 {
		t.Errorf("StepCount %d, want 20000", n)
	}
	a, r, ok := p.SessionPeaks(-1)
	if !ok || a.Index != 9000 || a.PeakAllocated != Bytes(mib(5000)) || r.Index != 9000 || r.PeakReserved != Bytes(mib(5010)) {
		t.Errorf("session peaks: allocated step %d %v, reserved step %d %v", a.Index, a.PeakAllocated, r.Index, r.PeakReserved)
	}
}

// The newest step can be left out of the session peaks (a step the process
// ended in the middle of), and only the newest.
func TestSessionPeaksLeaveOutTheNewestStep(t *testing.T) {
	f := newFeed(1, "s1")
	for step, peak := range []int64{10, 30, 20, 90} {
		f.phase("forward", step, 0, 0.01, mem(1, 1, 1), mem(1, 1, 1))
		f.phase("backward", step, 0, 0.01, mem(1, 1, 1), mem(peak, peak, peak))
	}
	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	for _, c := range []struct{ exclude, step int }{{-1, 3}, {3, 1}, {1, 3}} {
		a, r, ok := p.SessionPeaks(c.exclude)
		if !ok || a.Index != c.step || r.Index != c.step {
			t.Errorf("leaving out %d: peaks at steps %d and %d, want %d", c.exclude, a.Index, r.Index, c.step)
		}
	}
}
