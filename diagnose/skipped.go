package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// maxSkippedListed bounds the skipped steps a diagnosis names one by one.
const maxSkippedListed = 8

// SkippedUpdate reports whether step st of p ran without updating: p has an
// optimizer, st trained (a forward, loss or backward) and had no optimizer
// step (a backward, then the next zero_grad before any optimizer.step()),
// and st is neither a step that failed, nor the step p ended in, nor a last
// one the run ended before it updated (UnfinishedStep). A row of a lone
// zero_grad trained nothing: a watch begun inside a step whose update was
// already under way (auto-attach's next model under Lightning, whose
// optimizer.step() runs the training step as its closure).
func SkippedUpdate(p *session.Process, st *session.Step) bool {
	return !st.Stepped && st.Failed == "" && !p.NoOptimizer() && trained(st) &&
		st.Index != partialStep(p) && st.Index != UnfinishedStep(p)
}

// trained reports whether st has a training phase besides zero_grad.
func trained(st *session.Step) bool {
	for i := range st.Phases {
		if c := &st.Phases[i]; !c.User && c.Name != "zero_grad" {
			return true
		}
	}
	return false
}

// Skipped is the steps of a process that skipped their update, among the
// steps the table holds.
type Skipped struct {
	Count int `json:"count"`
	// Of is how many finished steps the table holds.
	Of int `json:"of"`
	// Steps are the first of them, in order.
	Steps []int `json:"steps"`
	// Alternating is true when they come every other step: another
	// optimizer updates between this model's updates, through it (a GAN,
	// one model watched), or the loop zeroes gradients it never used.
	Alternating bool `json:"alternating"`
	// Period is k when they come every k-th step through the table, k >= 2
	// (2 when Alternating): a GAN with one model watched whose other
	// optimizer steps once for every k-1 updates of this one (WGAN's
	// critic iterations); 0 otherwise.
	Period int `json:"period"`
}

// minPeriodic is how many skipped steps at one stride it takes to read them
// as another optimizer's turn rather than a GradScaler's skips.
const minPeriodic = 3

// skippedSteps reads the steps of p that skipped their update, nil when
// none did.
func skippedSteps(p *session.Process) *Skipped {
	s := &Skipped{Steps: []int{}}
	last, pairs := false, 0 // whether the row before was skipped; skipped rows after a skipped one
	stride, prev := 0, -1   // the one gap between skipped steps (-1: gaps differ), the last skipped
	partial, unfinished := partialStep(p), UnfinishedStep(p)
	for _, st := range p.Steps() {
		if st.Index == partial || st.Index == unfinished || st.Failed != "" {
			continue
		}
		s.Of++
		skipped := SkippedUpdate(p, st)
		if skipped {
			s.Count++
			if len(s.Steps) < maxSkippedListed {
				s.Steps = append(s.Steps, st.Index)
			}
			if last {
				pairs++
			}
			if prev >= 0 && stride >= 0 {
				if gap := st.Index - prev; stride == 0 || gap == stride {
					stride = gap
				} else {
					stride = -1
				}
			}
			prev = st.Index
		}
		last = skipped
	}
	if s.Count == 0 {
		return nil
	}
	s.Alternating = s.Count >= minPeriodic && pairs == 0 && 5*s.Count >= 2*s.Of
	switch {
	case s.Alternating:
		s.Period = 2
	case s.Count >= minPeriodic && stride > 2 && (s.Count+1)*stride >= s.Of:
		// One every stride steps, through the table: no GradScaler's
		// skips come so regularly.
		s.Period = stride
	}
	return s
}

// ordinal is n as "3rd", "4th", "11th".
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprint(n) + suffix
}

// Line says which steps skipped their update and the likely reason; ""
// for none.
func (s *Skipped) Line() string {
	if s == nil || s.Count == 0 {
		return ""
	}
	const watchEach = "for a GAN, watch each model with its own optimizer: vramscope.watch(netD, optD, " +
		"name=\"D\") and vramscope.watch(netG, optG, name=\"G\") (docs/hook.md, \"Several models\")"
	if s.Alternating {
		return fmt.Sprintf("every other step skipped its optimizer step (%d of %d): another optimizer updates "+
			"between this model's updates, through this model (a GAN: each model's optimizer steps in turn, "+
			"the generator's update runs through the discriminator), so each iteration shows as two steps; "+
			"else the loop zeroes gradients it never stepped with · %s", s.Count, s.Of, watchEach)
	}
	if s.Period > 2 {
		return fmt.Sprintf("every %s step skipped its optimizer step (%d of %d): another optimizer updates "+
			"once for every %d updates of this model, through it (a GAN that trains the critic %d times "+
			"for each generator update, as WGAN does: the generator's update runs through the critic), so "+
			"each iteration shows as %d steps · %s", ordinal(s.Period), s.Count, s.Of, s.Period-1,
			s.Period-1, s.Period, watchEach)
	}
	named := make([]string, len(s.Steps))
	for i, n := range s.Steps {
		named[i] = fmt.Sprint(n)
	}
	list := strings.Join(named, ", ")
	if rest := s.Count - len(s.Steps); rest > 0 {
		list += fmt.Sprintf(" and %d more", rest)
	}
	steps := "step"
	if s.Count > 1 {
		steps = "steps"
	}
	return fmt.Sprintf("%d %s skipped the optimizer step: %s (a backward, then the next zero_grad before any "+
		"optimizer.step(), as a GradScaler skips it when it finds inf or NaN gradients) · their peaks count "+
		"with the others", s.Count, steps, list)
}

// unupdatedLines are the lines of the steps that never updated: those
// that failed while the run went on, then those that skipped their update.
func (d *Diagnosis) unupdatedLines() []string {
	var lines []string
	for _, line := range []string{d.Failed.Line(), d.Skipped.Line()} {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}
