package diagnose

import (
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/session"
)

// PhasePeaks is one user phase (vramscope.phase("eval")) or the evaluation
// forwards (EvalPhase) over the steps of the table.
type PhasePeaks struct {
	Name string `json:"name"`
	// Steps is how many steps had it, Every the median number of steps
	// between two of them (0 with one).
	Steps int `json:"steps"`
	Every int `json:"every"`
	// Step is the step whose phase had Peak (the first of equals).
	Step int `json:"peak_step"`
	// Peak is its highest allocated peak; AboveTraining is Peak minus the
	// training peak the pattern reports (negative below it), 0 unknown.
	Peak          session.Bytes `json:"peak_allocated"`
	AboveTraining int64         `json:"above_training"`
	// Grad is true when the hook's evaluation ran a forward with gradients
	// enabled in one of these steps (session.Cell.Grad).
	Grad bool `json:"grad"`
}

// userPhases gathers the user and evaluation phases of the step table.
func userPhases(p *session.Process, training session.Bytes) []PhasePeaks {
	var out []PhasePeaks
	at := map[string][]int{}
	for _, st := range p.Steps() {
		for i := range st.Phases {
			c := &st.Phases[i]
			if !c.User || !c.PeakAllocated.Known() {
				continue
			}
			k := slices.IndexFunc(out, func(u PhasePeaks) bool { return u.Name == c.Name })
			if k < 0 {
				out = append(out, PhasePeaks{Name: c.Name, Peak: session.Unknown})
				k = len(out) - 1
			}
			out[k].Steps++
			if c.PeakAllocated > out[k].Peak {
				out[k].Peak, out[k].Step = c.PeakAllocated, st.Index
			}
			at[c.Name] = append(at[c.Name], st.Index)
			out[k].Grad = out[k].Grad || c.Grad
		}
	}
	for k := range out {
		u := &out[k]
		if idx := at[u.Name]; len(idx) > 1 {
			gaps := make([]float64, len(idx)-1)
			for i := range gaps {
				gaps[i] = float64(idx[i+1] - idx[i])
			}
			u.Every = int(medianF(gaps))
		}
		if training.Known() {
			u.AboveTraining = int64(u.Peak - training)
		}
	}
	return out
}

// evalGradStep is the last step after which the hook's evaluation ran a
// forward of the model with gradients enabled (docs/hook.md, "Eval mode
// with gradients enabled"), read or not; -1 when none did.
func evalGradStep(p *session.Process) int {
	last := -1
	for _, st := range p.Steps() {
		if c := st.Cell(session.EvalPhase); c != nil && c.User && c.Grad {
			last = st.Index
		}
	}
	return last
}

// Line describes a user phase: "eval peaks at 5120 MiB every 50 steps,
// 791 MiB above training".
func (u *PhasePeaks) Line() string {
	line := fmt.Sprintf("%s peaks at %s MiB", u.Name, u.Peak.MiBString())
	switch {
	case u.Every == 1:
		line += " every step"
	case u.Every > 1:
		line += fmt.Sprintf(" every %d steps", u.Every)
	case u.Steps == 1:
		line += " (once)"
	}
	switch {
	case u.AboveTraining > 0:
		line += fmt.Sprintf(", %s MiB above training", session.Bytes(u.AboveTraining).MiBString())
	case u.AboveTraining < 0:
		line += fmt.Sprintf(", %s MiB below training", session.Bytes(-u.AboveTraining).MiBString())
	}
	if u.Grad {
		line += ", run with gradients enabled"
	}
	return line
}
