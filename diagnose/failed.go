package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// maxFailedListed bounds the failed steps a diagnosis names one by one.
const maxFailedListed = 64

// FailedStep is a step that did not finish though the process went on: an
// error unwound one of its phases and the loop caught it (docs/hook.md, "A
// step that failed").
type FailedStep struct {
	Step  int    `json:"step"`
	Phase string `json:"phase"`
	// Why is ipc.FailedOOM (the allocator ran out of memory in the phase)
	// or ipc.FailedError.
	Why string `json:"why"`
}

// Failed is the failed steps of a process: how many over the whole
// session, and the first of those the step table still holds.
type Failed struct {
	Count int          `json:"count"`
	Steps []FailedStep `json:"steps"`
}

// FailedCount is how many steps of p failed while it went on: those
// whose phase raised (session.Step.Failed) but the one it ended in, which
// is its ending (partial_step), not a step it went on from.
func FailedCount(p *session.Process) int {
	n := p.FailedCount()
	if dead := partialStep(p); dead >= 0 && n > 0 {
		if st := StepRow(p, dead); st != nil && st.Failed != "" {
			n--
		}
	}
	return n
}

// failedSteps reads the failed steps of p, nil when none failed.
func failedSteps(p *session.Process) *Failed {
	n := FailedCount(p)
	if n == 0 {
		return nil
	}
	dead := partialStep(p)
	f := &Failed{Count: n, Steps: []FailedStep{}}
	for _, st := range p.Steps() {
		if st.Failed == "" || st.Index == dead || len(f.Steps) == maxFailedListed {
			continue
		}
		phase := ""
		for i := range st.Phases {
			if c := &st.Phases[i]; c.Failed != "" {
				phase = c.Name
			}
		}
		f.Steps = append(f.Steps, FailedStep{Step: st.Index, Phase: phase, Why: st.Failed})
	}
	return f
}

// Line says which steps failed, where and why, and that their peaks are
// the failed attempts', left out of the figures of the finished steps.
func (f *Failed) Line() string {
	if f == nil || f.Count == 0 {
		return ""
	}
	// Consecutive steps that failed alike are one range: a batch size
	// search fails step after step.
	named := make([]string, 0, len(f.Steps))
	for i := 0; i < len(f.Steps); {
		s, j := f.Steps[i], i+1
		for j < len(f.Steps) && f.Steps[j].Step == f.Steps[j-1].Step+1 &&
			f.Steps[j].Phase == s.Phase && f.Steps[j].Why == s.Why {
			j++
		}
		why := "an error the loop caught"
		if s.Why == ipc.FailedOOM {
			why = "out of memory, caught"
		}
		where := Where(s.Step, s.Phase)
		if last := f.Steps[j-1].Step; last > s.Step {
			where = fmt.Sprintf("steps %d–%d", s.Step, last)
			if s.Phase != "" {
				where = phaseName(s.Phase) + " of " + where
			}
		}
		named = append(named, fmt.Sprintf("%s (%s)", where, why))
		i = j
	}
	more := ""
	if rest := f.Count - len(f.Steps); rest > 0 {
		more = fmt.Sprintf(" and %d more", rest)
	}
	steps := "step"
	if f.Count > 1 {
		steps = "steps"
	}
	return fmt.Sprintf("%d %s failed and the run went on: %s%s · left out of the steady figures (a failed step's peak is its failed attempt's)",
		f.Count, steps, strings.Join(named, "; "), more)
}
