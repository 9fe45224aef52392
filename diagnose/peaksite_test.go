package diagnose

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// On the host the pages of backward's high stay resident, so the optimizer
// step after it peaks a few pages higher: the high was reached first in
// backward, and that is where the session peak is placed. An allocator's
// figures are exact to the byte: there the higher phase holds it.
func TestTiedPeakGoesToThePhaseThatReachedItFirst(t *testing.T) {
	msgs := demoEveryPhase(t, "warmup", 8)
	var top int64
	for i := range msgs {
		m := &msgs[i]
		if m.Type != ipc.TypePhase || m.Edge != ipc.EdgeEnd || m.Mem == nil {
			continue
		}
		switch m.Name {
		case "backward":
			top = m.Mem.MaxAllocated
		case "step":
			mem := *m.Mem
			mem.MaxAllocated = max(mem.MaxAllocated, top+64<<10) // 16 pages above backward's high
			m.Mem = &mem
		}
	}
	for _, c := range []struct {
		host bool
		want string
	}{{true, "backward"}, {false, "step"}} {
		m := msgs
		if c.host {
			m = hostRun(msgs)
		}
		s, p := storeOf(t, m, false)
		if d := Diagnose(s, p); d.Peak.Phase != c.want {
			t.Errorf("host %v: session peak in %s of step %d, want %s", c.host, d.Peak.Phase, d.Peak.Step, c.want)
		}
	}
}

// Across steps too: a later step's high a few pages above an earlier one's
// on the host was reached first in the earlier step.
func TestTiedPeakAcrossStepsGoesToTheFirstStep(t *testing.T) {
	msgs := demoEveryPhase(t, "warmup", 8)
	for i := range msgs {
		m := &msgs[i]
		if m.Type == ipc.TypePhase && m.Edge == ipc.EdgeEnd && m.Name == "backward" && m.Step == 6 && m.Mem != nil {
			mem := *m.Mem
			mem.MaxAllocated += 64 << 10
			m.Mem = &mem
		}
	}
	for _, c := range []struct {
		host bool
		want int
	}{{true, 1}, {false, 6}} {
		m := msgs
		if c.host {
			m = hostRun(msgs)
		}
		s, p := storeOf(t, m, false)
		if d := Diagnose(s, p); d.Peak.Step != c.want || d.Peak.Phase != "backward" {
			t.Errorf("host %v: session peak in %s of step %d, want backward of step %d", c.host, d.Peak.Phase, d.Peak.Step, c.want)
		}
	}
}
