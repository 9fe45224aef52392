package tui

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// diagCache keeps the diagnosis of the process shown until a step ends or
// a new anatomy arrives: it reads every step of the session, once per
// change rather than once per frame. It also holds the verdict on screen
// steady: a live run's peaks are noisy (a CPU run's host RSS most), and a
// verdict that flips with every step (steady, warmup at step 1, at step 2,
// at step 1 again) says nothing. A new verdict replaces the one shown only
// once it has been the diagnosis for holdSteps finished steps in a row, or
// when the run ends; until then the one shown stays, with its figures.
type diagCache struct {
	proc      *session.Process
	store     *session.Store
	steps     int
	anatomies int
	ended     bool // the process ended or reported out of memory
	d         diagnose.Diagnosis

	pending  verdict // a verdict other than the one shown, and
	seen     int     // for how many diagnoses in a row it has held
	lastStep int     // the finished steps at the last count
}

// holdSteps is how many finished steps in a row a new verdict must hold
// before it replaces the one on screen.
const holdSteps = 3

// verdict is what a diagnosis concludes, without its figures.
type verdict struct {
	pattern                diagnose.Pattern
	warmupStep, steadyFrom int
}

func verdictOf(d *diagnose.Diagnosis) verdict {
	return verdict{d.Pattern, d.WarmupStep, d.SteadyFrom}
}

func (c *diagCache) get(s *session.Store, p *session.Process) *diagnose.Diagnosis {
	n, a, e := len(p.StepPeaks()), len(p.Anatomies), p.End != nil || p.OOM != nil
	if c.proc != p || c.store != s {
		c.d, c.pending, c.seen = diagnose.Diagnosis{}, verdict{}, 0
	}
	if c.proc != p || c.store != s || c.steps != n || c.anatomies != a || c.ended != e {
		c.hold(diagnose.Diagnose(s, p), n, e)
		c.proc, c.store, c.steps, c.anatomies, c.ended = p, s, n, a, e
	}
	return &c.d
}

// hold takes a fresh diagnosis made after steps finished steps: shown at
// once when it keeps the verdict on screen (new figures), when nothing
// was concluded before, or when the run has ended; else shown once it has
// held for holdSteps steps.
func (c *diagCache) hold(d diagnose.Diagnosis, steps int, ended bool) {
	v := verdictOf(&d)
	if ended || c.d.Pattern == "" || c.d.Pattern == diagnose.PatternUnknown || v == verdictOf(&c.d) {
		c.d, c.pending, c.seen = d, verdict{}, 0
		return
	}
	if v != c.pending {
		c.pending, c.seen, c.lastStep = v, 1, steps
	} else if steps > c.lastStep {
		c.seen, c.lastStep = c.seen+1, steps
	}
	if c.seen >= holdSteps {
		c.d, c.pending, c.seen = d, verdict{}, 0
	}
}

// bannerText is the diagnosis headline, marked so that warmup (info) and
// growth (a warning) read apart without colour too.
func bannerText(d *diagnose.Diagnosis) string {
	if d == nil {
		return ""
	}
	h := textesc.String(d.Headline())
	if e := d.End; e != nil && e.Abrupt { // "ended abruptly in …: likely out of memory"
		return styleWarn.Render("⚠ " + h)
	}
	switch d.Pattern {
	case diagnose.PatternGrowth:
		return styleWarn.Render("⚠ " + h)
	case diagnose.PatternWarmup:
		return styleInfo.Render("ℹ " + h)
	case diagnose.PatternSteady:
		return styleOK.Render("✓ " + h)
	}
	if d.Steps < diagnose.MinSteps && strings.HasPrefix(d.Reason, "need ") {
		// Not a finding: the run is young. Say how far along it is.
		return styleDim.Render(fmt.Sprintf("… collecting: %d of %d steps needed for a diagnosis", d.Steps, diagnose.MinSteps))
	}
	return styleDim.Render("… " + h)
}

// marksOf picks the rows the table highlights.
func marksOf(d *diagnose.Diagnosis) rowMarks {
	r := rowMarks{peak: d.Peak.Step}
	if d.Pattern == diagnose.PatternWarmup {
		r.warmupFrom, r.warmupTo = d.FirstStep, d.WarmupEnd
	}
	return r
}
