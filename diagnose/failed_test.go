package diagnose

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// Steps that failed alike one after another (a batch size search) are one
// range; others are named one by one, and those past the list are counted.
func TestFailedStepsAreNamedInRanges(t *testing.T) {
	f := &Failed{Count: 12}
	for s := range 9 {
		f.Steps = append(f.Steps, FailedStep{Step: s, Phase: "forward", Why: ipc.FailedError})
	}
	f.Steps = append(f.Steps, FailedStep{Step: 9, Phase: "backward", Why: ipc.FailedOOM},
		FailedStep{Step: 40, Phase: "step", Why: ipc.FailedOOM})
	want := "12 steps failed and the run went on: forward of steps 0–8 (an error the loop caught); " +
		"backward of step 9 (out of memory, caught); optimizer step of step 40 (out of memory, caught) and 1 more" +
		" · left out of the steady figures (a failed step's peak is its failed attempt's)"
	if got := f.Line(); got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
	if (*Failed)(nil).Line() != "" {
		t.Errorf("a line without failed steps")
	}
}
