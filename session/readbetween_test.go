package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// unreadPhases feeds a plain step's automatic phases from..to, none of
// their ends read.
func unreadPhases(f *feed, step int, names ...string) {
	for _, n := range names {
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeBegin})
		f.t += 0.01
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeEnd})
	}
}

func userPhase(f *feed, name string, step int, begin, end *ipc.Mem) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, User: true, Step: step, Edge: ipc.EdgeBegin, Mem: begin})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, User: true, Step: step, Edge: ipc.EdgeEnd, Mem: end})
}

// With exact peaks every read resets the counters, so a read that is no
// phase end of the step's own (a user phase's edge, a mark) ends the
// interval the step's later reads start from. Inside a plain step, between
// its automatic phases (gradient clipping in a phase of its own), the
// step's peak before it is in that read, not in the step's closing read:
// the step's exact peak is the larger of the two, never the user phase's
// own (the interval between its edges). A user phase inside an automatic
// phase is in that phase's peak, edges and interior. One between steps
// touches no step.
func TestReadsBetweenPhasesStayInTheStepsPeak(t *testing.T) {
	f := newFeed(1, "between", exactHook)
	breakdownSteps(f)
	// Step 3: clipping after the backward, which peaked at 4309.
	unreadPhases(f, 3, "zero_grad", "forward", "loss", "backward")
	userPhase(f, "clip", 3, mem(1650, 4309, 4704), mem(1650, 6000, 6000))
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 3, Edge: ipc.EdgeBegin})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 3, Edge: ipc.EdgeEnd, Mem: mem(1650, 2400, 6000), Span: ipc.SpanStep})
	// Between steps 3 and 4: a checkpoint (the step just finished, as the
	// hook numbers it), then step 4 with a mark between its phases.
	userPhase(f, "checkpoint", 3, mem(1650, 1700, 6000), mem(1650, 9000, 9000))
	unreadPhases(f, 4, "zero_grad", "forward")
	f.add(&ipc.Message{Type: ipc.TypeMark, Name: "probe", Step: 4, Mem: mem(2935, 4400, 9000)})
	unreadPhases(f, 4, "loss", "backward")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 4, Edge: ipc.EdgeBegin})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 4, Edge: ipc.EdgeEnd, Mem: mem(1650, 4309, 9000), Span: ipc.SpanStep})
	// Step 5, read by phase: a user phase inside its forward.
	f.phase("zero_grad", 5, 0, 0.01, nil, mem(1370, 1651, 9000))
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 5, Edge: ipc.EdgeBegin})
	userPhase(f, "attention", 5, mem(2000, 2500, 9000), mem(2600, 3100, 9000))
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 5, Edge: ipc.EdgeEnd, Mem: mem(2935, 2935, 9000)})
	f.phase("loss", 5, 0, 0.01, nil, mem(3393, 3393, 9000))
	f.phase("backward", 5, 0, 0.01, nil, mem(1650, 4309, 9000))
	f.phase("step", 5, 0, 0.01, nil, mem(1650, 1650, 9000))

	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	pk := p.StepPeaks()
	for _, w := range []struct {
		step int
		peak int64
	}{{3, 4309}, {4, 4400}, {5, 4309}} {
		if got := pk[w.step]; got.Peak != Exact || got.PeakAllocated != Bytes(mib(w.peak)) {
			t.Errorf("step %d: %d MiB %s, want an exact %d MiB", w.step, got.PeakAllocated/MiB, got.Peak, w.peak)
		}
	}
	// Step 5's forward peaked in the user phase inside it (3100 MiB).
	if c := p.StepRow(5).Cell("forward"); !c.Exact || c.PeakAllocated != Bytes(mib(3100)) {
		t.Errorf("forward of step 5: %d MiB exact %v, want an exact 3100 MiB", c.PeakAllocated/MiB, c.Exact)
	}
	if c := p.StepRow(3).Cell("clip"); c == nil || c.PeakAllocated != Bytes(mib(6000)) {
		t.Errorf("the clip phase keeps its own peak: %+v", c)
	}
}

// A user phase around automatic phases (forward to backward) holds them:
// its interval is their step's too, so a plain step's peak is in its end
// read, not only in the step's closing read after it.
func TestAUserPhaseAroundPhasesIsInTheStepsPeak(t *testing.T) {
	f := newFeed(1, "around", exactHook)
	breakdownSteps(f)
	unreadPhases(f, 3, "zero_grad")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "fwd_bwd", User: true, Step: 3, Edge: ipc.EdgeBegin, Mem: mem(1400, 1651, 4704)})
	unreadPhases(f, 3, "forward", "loss", "backward")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "fwd_bwd", User: true, Step: 3, Edge: ipc.EdgeEnd, Mem: mem(1650, 4309, 4704)})
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 3, Edge: ipc.EdgeBegin})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 3, Edge: ipc.EdgeEnd, Mem: mem(1650, 2400, 4704), Span: ipc.SpanStep})
	// Around a whole step: its end comes after the step's closing read.
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "train", User: true, Step: 3, Edge: ipc.EdgeBegin, Mem: mem(1650, 1700, 4704)})
	unreadPhases(f, 4, "zero_grad", "forward", "loss", "backward")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 4, Edge: ipc.EdgeBegin})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 4, Edge: ipc.EdgeEnd, Mem: mem(1650, 4309, 4704), Span: ipc.SpanStep})
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "train", User: true, Step: 4, Edge: ipc.EdgeEnd, Mem: mem(1650, 9000, 9000)})
	s := New()
	s.ApplyAll(f.evs)
	pk := s.Processes()[0].StepPeaks()
	for _, w := range []struct {
		step int
		peak int64
	}{{3, 4309}, {4, 4309}} {
		if got := pk[w.step]; got.Peak != Exact || got.PeakAllocated != Bytes(mib(w.peak)) {
			t.Errorf("step %d: %d MiB %s, want an exact %d MiB", w.step, got.PeakAllocated/MiB, got.Peak, w.peak)
		}
	}
}
