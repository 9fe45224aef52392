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
	add(&ipc.Message{Type: ipc.TypeHello, Session: "s", PID: 7, Clock: &ipc.Clock{Mono: 10, Wall: 1.7e9}})
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
