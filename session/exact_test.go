package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// The figures are seed 001's own prints on the H100
// (../shared/recordings/h100/s001_stat_cuda.json), in MiB: step 0 peaks at
// 3717 in backward, step 1 at 4309; from step 1 on every phase ends at the
// same bytes (zero_grad 1370, forward 2935, loss 3393, backward 1650,
// step 1650).

// s001Step feeds one step the way hook 0.1.0 read it: end edges only, the
// peak counter never reset. peak is the step's own peak (in backward).
func s001Step(f *feed, step int, ends [5]int64, peak int64) {
	names := [5]string{"zero_grad", "forward", "loss", "backward", "step"}
	for i, n := range names {
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeBegin})
		f.t += 0.01
		f.top = max(f.top, ends[i])
		if n == "backward" {
			f.top = max(f.top, peak)
		}
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeEnd, Mem: mem(ends[i], f.top, 4704)})
	}
}

// A repeat far from its exact step (live.jsonl.gz has 60 steps) still
// finds it.
func TestARepeatFarFromItsExactStepIsInferred(t *testing.T) {
	f := newFeed(1, "s001")
	s001Step(f, 0, [5]int64{283, 2343, 2801, 1086, 1651}, 3717)
	same := [5]int64{1370, 2935, 3393, 1650, 1650}
	s001Step(f, 1, same, 4309)
	for i := 2; i < 80; i++ {
		s001Step(f, i, same, 3393)
	}
	s := New()
	s.ApplyAll(f.evs)
	pk := s.Processes()[0].StepPeaks()
	if last := pk[len(pk)-1]; last.Peak != Inferred || last.SameAs != 1 || last.PeakAllocated != Bytes(mib(4309)) {
		t.Fatalf("step 79: %d MiB %s same as %d, want step 1's 4309 MiB, inferred", last.PeakAllocated/MiB, last.Peak, last.SameAs)
	}
}

func TestARepeatedStepTakesTheExactStepsPeak(t *testing.T) {
	f := newFeed(1, "s001")
	s001Step(f, 0, [5]int64{283, 2343, 2801, 1086, 1651}, 3717)
	same := [5]int64{1370, 2935, 3393, 1650, 1650}
	s001Step(f, 1, same, 4309)
	for i := 2; i < 5; i++ {
		s001Step(f, i, same, 3393) // the counter stays at step 1's high
	}
	s001Step(f, 5, [5]int64{1370, 2935, 3393, 1651, 1651}, 3393) // one phase ends elsewhere
	s := New()
	s.ApplyAll(f.evs)
	pk := s.Processes()[0].StepPeaks()
	want := []struct {
		peak int64
		how  Exactness
		same int
	}{{3717, Exact, -1}, {4309, Exact, -1}, {4309, Inferred, 1}, {4309, Inferred, 1}, {4309, Inferred, 1}, {3393, Bound, -1}}
	for i, w := range want {
		if got := pk[i]; got.PeakAllocated != Bytes(mib(w.peak)) || got.Peak != w.how || got.SameAs != w.same {
			t.Errorf("step %d: %d MiB %s same as %d, want %d MiB %s same as %d", i, got.PeakAllocated/MiB, got.Peak, got.SameAs, w.peak, w.how, w.same)
		}
	}
	// Its backward takes step 1's exact backward peak, marked inferred.
	if c := s.Processes()[0].Steps()[3].Cell("backward"); !c.Inferred || c.Exact || c.PeakAllocated != Bytes(mib(4309)) {
		t.Errorf("backward of step 3: %+v, want step 1's 4309 MiB, inferred", c)
	}
	if pk[3].Bound != Bytes(mib(3393)) || pk[3].Held != Bytes(mib(1650)) {
		t.Errorf("step 3: bound %d held %d, want 3393 MiB seen and 1650 MiB held", pk[3].Bound/MiB, pk[3].Held/MiB)
	}
}

// exactHook is an issue-19 hook: it resets the counters after every read.
func exactHook(h *ipc.Message) { h.Hook.ExactPeaks = true }

func plainStep(f *feed, step int, m *ipc.Mem, sameAs *int) {
	for _, n := range []string{"zero_grad", "forward", "loss", "backward", "step"} {
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeBegin})
		f.t += 0.01
		end := &ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeEnd}
		if n == "step" {
			end.Mem, end.Span, end.SameAs = m, ipc.SpanStep, sameAs
		}
		f.add(end)
	}
}

// breakdownSteps feeds steps 0, 1 and 2 as an exact-peaks hook reads
// them: each end read's counter is that phase's own peak (reset at the
// read before), so a phase below the session high is exact too.
func breakdownSteps(f *feed) {
	for i := range 3 {
		f.phase("zero_grad", i, 0, 0.01, nil, mem(1370, 1651, 4704))
		f.phase("forward", i, 0, 0.01, nil, mem(2935, 2935, 4704))
		f.phase("loss", i, 0, 0.01, nil, mem(3393, 3393, 4704))
		f.phase("backward", i, 0, 0.01, nil, mem(1650, 4309, 4704))
		f.phase("step", i, 0, 0.01, nil, mem(1650, 1650, 4704))
	}
}

func TestExactPeaksHookPlainStepsAndGaps(t *testing.T) {
	f := newFeed(1, "exact", exactHook)
	breakdownSteps(f)
	k := 2
	plainStep(f, 3, mem(1650, 4309, 4704), &k) // the same to the byte
	plainStep(f, 4, mem(1652, 4311, 4704), &k) // within noise
	plainStep(f, 5, mem(1800, 4459, 4704), nil)
	f.seq += 3 // three messages lost: the counter was reset unseen
	plainStep(f, 6, mem(1800, 4000, 4704), nil)
	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	if c := p.Steps()[1].Cell("forward"); !c.Exact || c.PeakAllocated != Bytes(mib(2935)) {
		t.Errorf("forward of step 1: %d MiB exact %v, want an exact 2935 MiB", c.PeakAllocated/MiB, c.Exact)
	}
	pk := p.StepPeaks()
	want := []struct {
		peak   int64
		how    Exactness
		same   int
		within Bytes
	}{{4309, Exact, -1, 0}, {4309, Exact, -1, 0}, {4309, Exact, -1, 0}, {4309, Exact, 2, 0}, {4311, Exact, 2, 2 * MiB}, {4459, Exact, -1, 0}, {4000, Bound, -1, 0}}
	for i, w := range want {
		if got := pk[i]; got.PeakAllocated != Bytes(mib(w.peak)) || got.Peak != w.how || got.SameAs != w.same || got.Within != w.within {
			t.Errorf("step %d: %d MiB %s same as %d within %d, want %d MiB %s same as %d within %d",
				i, got.PeakAllocated/MiB, got.Peak, got.SameAs, got.Within, w.peak, w.how, w.same, w.within)
		}
	}
	if pk[5].Held != Bytes(mib(1800)) {
		t.Errorf("plain step held %d MiB, want 1800", pk[5].Held/MiB)
	}
	if c := p.Steps()[3].Cell("step"); c.Exact {
		t.Errorf("a plain step's step phase is not exact: its read holds the step's peak")
	}
}

// A mark's read resets the counters too (exact-peaks hook): the phase it
// falls in peaks at the larger of the two intervals; a message lost before
// the mark leaves the phase a lower bound.
func TestAMarkInsideAPhaseKeepsItsPeak(t *testing.T) {
	for _, lose := range []bool{false, true} {
		f := newFeed(1, "mark", exactHook)
		f.phase("zero_grad", 0, 0, 0.01, nil, mem(1370, 1370, 4704))
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 0, Edge: ipc.EdgeBegin})
		if lose {
			f.seq++
		}
		f.add(&ipc.Message{Type: ipc.TypeMark, Name: "half", Step: 0, Mem: mem(2000, 3000, 4704)})
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 0, Edge: ipc.EdgeEnd, Mem: mem(2935, 2935, 4704)})
		s := New()
		s.ApplyAll(f.evs)
		s.Apply(Event{At: s.Last(), Conn: 1, Msg: &ipc.Message{V: 1, Type: ipc.TypePhase, Seq: f.seq + 1, T: f.t, Name: "loss", Step: 0, Edge: ipc.EdgeBegin}})
		c := s.Processes()[0].Steps()[0].Cell("forward")
		if c == nil || c.PeakAllocated != Bytes(mib(3000)) || c.Exact == lose {
			t.Errorf("lost %v: forward %+v, want 3000 MiB, exact %v", lose, c, !lose)
		}
	}
}

// A measured step from step 3 on: the hook reads every phase but
// zero_grad (it only frees). Its reads cover the whole step, so its peak
// is exact; zero_grad is "not read" (no peak, not a bound), and the plain
// step after it keeps its same_as. An unread phase other than zero_grad
// after the step's last read is not covered: the step stays a bound.
func TestAMeasuredStepWithZeroGradUnreadIsExact(t *testing.T) {
	f := newFeed(1, "exact", exactHook)
	breakdown := func(i int, zeroRead bool) {
		var zm *ipc.Mem
		if zeroRead {
			zm = mem(1370, 1651, 4704)
		}
		f.phase("zero_grad", i, 0, 0.01, nil, zm)
		f.phase("forward", i, 0, 0.01, nil, mem(2935, 2935, 4704))
		f.phase("loss", i, 0, 0.01, nil, mem(3393, 3393, 4704))
		f.phase("backward", i, 0, 0.01, nil, mem(1650, 4309, 4704))
		f.phase("step", i, 0, 0.01, nil, mem(1650, 1650, 4704))
	}
	for i := range 3 {
		breakdown(i, true)
	}
	breakdown(3, false) // a measured step
	k := 3
	plainStep(f, 4, mem(1650, 4309, 4704), &k)
	f.phase("zero_grad", 5, 0, 0.01, nil, nil)
	f.phase("forward", 5, 0, 0.01, nil, mem(2935, 2935, 4704))
	f.phase("loss", 5, 0, 0.01, nil, nil) // unread, and no read after it covers it
	s := New()
	s.ApplyAll(f.evs)
	s.Apply(Event{At: s.Last(), Conn: 1, Msg: &ipc.Message{V: 1, Type: ipc.TypePhase, Seq: f.seq + 1, T: f.t, Name: "zero_grad", Step: 6, Edge: ipc.EdgeBegin}})
	p := s.Processes()[0]
	pk := p.StepPeaks()
	if pk[3].Peak != Exact || pk[3].PeakAllocated != Bytes(mib(4309)) {
		t.Errorf("measured step 3: %d MiB %s, want 4309 MiB exact", pk[3].PeakAllocated/MiB, pk[3].Peak)
	}
	if c := p.Steps()[3].Cell("zero_grad"); c.Read || c.Exact || c.PeakAllocated.Known() {
		t.Errorf("zero_grad of step 3: %+v, want not read: no peak, not exact", c)
	}
	if c := p.Steps()[3].Cell("backward"); !c.Read || !c.Exact || c.PeakAllocated != Bytes(mib(4309)) {
		t.Errorf("backward of step 3: %+v, want read, exact 4309 MiB", c)
	}
	if pk[4].Peak != Exact || pk[4].SameAs != 3 || pk[4].Within != 0 {
		t.Errorf("plain step 4: %s same as %d within %d, want exact, same as step 3 to the byte", pk[4].Peak, pk[4].SameAs, pk[4].Within)
	}
	if pk[5].Peak != Bound {
		t.Errorf("step 5 ends in an unread loss: %s, want a bound", pk[5].Peak)
	}
}
