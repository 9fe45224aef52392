package tui

import (
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// orderedSteps feeds steps whose automatic phases ran in the given order
// (each phase begins and ends before the next) and returns the step table.
func orderedSteps(t *testing.T, steps int, order []string) []*session.Step {
	t.Helper()
	s, add := phaseFeed(false)
	for i := range steps {
		for _, ph := range order {
			for _, e := range []string{ipc.EdgeBegin, ipc.EdgeEnd} {
				add(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: i, Edge: e})
			}
		}
	}
	return s.Processes()[0].Steps()
}

// The table's phase columns are in the order the phases ran, as the
// report, the CSV and the trace list them: Lightning runs training_step
// (forward, loss) before zero_grad.
func TestPhaseColumnsFollowTheOrderThePhasesRan(t *testing.T) {
	for _, order := range [][]string{
		{"zero_grad", "forward", "loss", "backward", "step"}, // a plain loop
		{"forward", "loss", "zero_grad", "backward", "step"}, // Lightning
	} {
		steps := orderedSteps(t, 3, order)
		for _, st := range steps {
			var got []string
			for _, c := range st.Phases {
				got = append(got, c.Name)
			}
			if !reflect.DeepEqual(got, order) {
				t.Errorf("step %d phases %v, ran %v", st.Index, got, order)
			}
		}
		if got := phaseColumns(steps); !reflect.DeepEqual(got, order) {
			t.Errorf("columns %v, phases ran %v", got, order)
		}
	}
}
