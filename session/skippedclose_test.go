package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// skippedStep feeds a plain step that skipped its update: its phases but
// the step phase, none of their ends read.
func skippedStep(f *feed, step int) {
	for _, n := range []string{"zero_grad", "forward", "loss", "backward"} {
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeBegin})
		f.t += 0.01
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: step, Edge: ipc.EdgeEnd})
	}
}

// closingBegin is the next step's zero_grad begin carrying the skipped
// step's closing read (protocol closes).
func closingBegin(f *feed, step int, m *ipc.Mem, sameAs *int) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "zero_grad", Step: step + 1, Edge: ipc.EdgeBegin, Mem: m,
		Closes: &ipc.Closes{Step: step, SameAs: sameAs}})
}

// A plain step that skipped its update is read once, where the next step
// begins (docs/protocol.md, "Exact peaks"): that read is its exact peak
// and its held memory, and the step after it is read from there. Without
// the read (an older hook) the step stays a bound with no held memory; a
// message lost before the read leaves the skipped step a bound.
func TestASkippedPlainStepIsClosedByTheNextBegin(t *testing.T) {
	f := newFeed(1, "skipclose", exactHook)
	breakdownSteps(f)
	k := 2
	plainStep(f, 3, mem(1650, 4309, 4704), &k)
	skippedStep(f, 4)
	closingBegin(f, 4, mem(1800, 4100, 4704), nil)
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "zero_grad", Step: 5, Edge: ipc.EdgeEnd})
	for _, n := range []string{"forward", "loss", "backward", "step"} {
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: n, Step: 5, Edge: ipc.EdgeBegin})
		f.t += 0.01
		end := &ipc.Message{Type: ipc.TypePhase, Name: n, Step: 5, Edge: ipc.EdgeEnd}
		if n == "step" {
			end.Mem, end.Span = mem(1650, 4309, 4704), ipc.SpanStep
		}
		f.add(end)
	}
	skippedStep(f, 6) // no closing read: an older hook's
	plainStep(f, 7, mem(1650, 4309, 4704), &k)
	skippedStep(f, 8)
	f.seq += 2 // lost before the closing read
	closingBegin(f, 8, mem(1650, 4000, 4704), &k)
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "zero_grad", Step: 9, Edge: ipc.EdgeEnd})
	unreadPhases(f, 9, "forward", "loss", "backward")
	// Read only after the loop moved on (a k-fold loop's next watch):
	// the peak is the step's, what it held is not known.
	no := false
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "zero_grad", Step: 10, Edge: ipc.EdgeBegin, Mem: mem(500, 4309, 4704),
		Closes: &ipc.Closes{Step: 9, Held: &no}})

	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	pk := p.StepPeaks()
	want := []struct {
		step int
		peak int64
		how  Exactness
		held int64
	}{{4, 4100, Exact, 1800}, {5, 4309, Exact, 1650}, {6, 0, Bound, -1}, {8, 0, Bound, 1650}, {9, 4309, Exact, -1}}
	for _, w := range want {
		got := pk[w.step]
		if got.Peak != w.how || w.how == Exact && got.PeakAllocated != Bytes(mib(w.peak)) {
			t.Errorf("step %d: %d MiB %s, want %d MiB %s", w.step, got.PeakAllocated/MiB, got.Peak, w.peak, w.how)
		}
		if wantHeld := Bytes(mib(w.held)); w.held < 0 && got.Held.Known() || w.held >= 0 && got.Held != wantHeld {
			t.Errorf("step %d held %d, want %d MiB", w.step, got.Held, w.held)
		}
	}
	row := p.StepRow(4)
	if !row.Plain() || !row.Moved() || row.Stepped {
		t.Errorf("step 4: plain %v moved %v stepped %v, want a plain step that moved and skipped its update",
			row.Plain(), row.Moved(), row.Stepped)
	}
	if r := p.StepRow(8); !r.Plain() || r.Moved() {
		t.Errorf("step 8: plain %v moved %v, want the hook's same_as kept", r.Plain(), r.Moved())
	}
}
