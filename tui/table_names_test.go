package tui

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// steps feeds phases of the named watches into a store and returns its
// process's step table: each entry of names is one step, "" for a step
// with no step phase (no optimizer).
func namedSteps(t *testing.T, names []string, stepped bool) []*session.Step {
	t.Helper()
	s, add := phaseFeed(false)
	for i, model := range names {
		phases := []string{"forward", "loss", "backward"}
		if stepped {
			phases = append(phases, "step")
		}
		for _, ph := range phases {
			for _, e := range []string{ipc.EdgeBegin, ipc.EdgeEnd} {
				add(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: i, Edge: e, Model: model})
			}
		}
	}
	return s.Processes()[0].Steps()
}

// phaseFeed returns a store that has had one process's hello (from a hook
// with exact peaks, or not) and the function that applies that process's
// next message to it (seq and hook time filled in, 10 ms apart).
func phaseFeed(exact bool) (*session.Store, func(*ipc.Message)) {
	s := session.New()
	var seq uint64
	tm := 10.0
	add := func(m *ipc.Message) {
		m.V, m.T = 1, tm
		if m.Type != ipc.TypeHello {
			seq++
			m.Seq = seq
		}
		tm += 0.01
		s.Apply(session.Event{Conn: 1, Msg: m})
	}
	add(&ipc.Message{Type: ipc.TypeHello, Session: "s", PID: 7, Clock: &ipc.Clock{Mono: 10, Wall: 1.7e9}, Hook: &ipc.HookConfig{ExactPeaks: exact}})
	return s, add
}

// A GAN's steps show their watch's name after the step number; one watch
// shows none.
func TestStepsTableNamesTheWatchOfEachStep(t *testing.T) {
	tb := stepsTable{w: 100, h: 10, follow: true}
	v := tb.view(namedSteps(t, []string{"D", "G", "D", "G"}, true), rowMarks{peak: -1})
	if !strings.Contains(v, "1    G ") || !strings.Contains(v, "2    D ") {
		t.Errorf("no step names in:\n%s", v)
	}
	one := tb.view(namedSteps(t, []string{"net", "net"}, true), rowMarks{peak: -1})
	if strings.Contains(one, "net") {
		t.Errorf("one watch needs no name column:\n%s", one)
	}
	if strings.Contains(v, "no optimizer") || strings.Contains(one, "no optimizer") {
		t.Error("steps with step phases have an optimizer")
	}
}

// Without an optimizer the table says how steps are cut.
func TestStepsTableSaysNoOptimizer(t *testing.T) {
	tb := stepsTable{w: 100, h: 10, follow: true}
	v := tb.view(namedSteps(t, []string{"net", "net", "net"}, false), rowMarks{peak: -1})
	if !strings.Contains(v, "no optimizer watched: a step ends at the next training forward after a backward") {
		t.Errorf("no note in:\n%s", v)
	}
}

// A step read once shows `"` for its training phases, and the figures of a
// user phase that read itself (between_steps here): hidden behind `"`, it
// said nothing of what ran between the steps.
func TestAStepReadOnceShowsItsUserPhasesFigures(t *testing.T) {
	s, add := phaseFeed(true)
	mem := func(alloc, peak int64) *ipc.Mem {
		return &ipc.Mem{Allocated: alloc << 20, MaxAllocated: peak << 20, Reserved: peak << 20, MaxReserved: peak << 20}
	}
	for _, ph := range []string{"forward", "loss", "backward", "step"} { // step 0: every phase read
		add(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: 0, Edge: ipc.EdgeBegin})
		add(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: 0, Edge: ipc.EdgeEnd, Mem: mem(1000, 3000)})
	}
	for _, ph := range []string{"forward", "loss", "backward", "step"} { // step 1: read once
		add(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: 1, Edge: ipc.EdgeBegin})
		end := &ipc.Message{Type: ipc.TypePhase, Name: ph, Step: 1, Edge: ipc.EdgeEnd}
		if ph == "step" {
			same := 0
			end.Mem, end.Span, end.SameAs = mem(1000, 3000), ipc.SpanStep, &same
		}
		add(end)
	}
	add(&ipc.Message{Type: ipc.TypePhase, Name: session.BetweenPhase, Step: 1, Edge: ipc.EdgeBegin, User: true})
	add(&ipc.Message{Type: ipc.TypePhase, Name: session.BetweenPhase, Step: 1, Edge: ipc.EdgeEnd, User: true, Mem: mem(1000, 7654)})
	add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 2, Edge: ipc.EdgeBegin})
	steps := s.Processes()[0].Steps()
	tb := stepsTable{w: 160, h: 10, follow: true}
	v := tb.view(steps, rowMarks{peak: -1})
	var row string
	for _, l := range strings.Split(v, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "1" {
			row = l
		}
	}
	if !strings.Contains(row, `"`) || !strings.Contains(row, "7654") {
		t.Errorf("step 1's row %q: want `\"` for its phases and between_steps' 7654 MiB, in\n%s", row, v)
	}
}

// A step that failed (a phase of it raised and the loop went on) is marked
// "!" in the table, and the legend says what the mark is.
func TestStepsTableMarksAFailedStep(t *testing.T) {
	s, add := phaseFeed(false)
	for i := range 3 {
		phases := []string{"forward", "loss", "backward", "step"}
		if i == 1 {
			phases = []string{"forward"}
		}
		for _, ph := range phases {
			add(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: i, Edge: ipc.EdgeBegin})
			end := &ipc.Message{Type: ipc.TypePhase, Name: ph, Step: i, Edge: ipc.EdgeEnd}
			if i == 1 {
				end.Failed = ipc.FailedOOM
			}
			add(end)
		}
	}
	tb := stepsTable{w: 100, h: 10, follow: true}
	v := tb.view(s.Processes()[0].Steps(), rowMarks{peak: -1})
	if !strings.Contains(v, "! 1 ") || strings.Contains(v, "! 0 ") || strings.Contains(v, "! 2 ") ||
		!strings.Contains(v, "! failed") {
		t.Errorf("the failed step is not marked:\n%s", v)
	}
}
