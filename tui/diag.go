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
// change rather than once per frame.
type diagCache struct {
	proc      *session.Process
	store     *session.Store
	steps     int
	anatomies int
	ended     bool // the process ended or reported out of memory
	d         diagnose.Diagnosis
}

func (c *diagCache) get(s *session.Store, p *session.Process) *diagnose.Diagnosis {
	n, a, e := len(p.StepPeaks()), len(p.Anatomies), p.End != nil || p.OOM != nil
	if c.proc != p || c.store != s || c.steps != n || c.anatomies != a || c.ended != e {
		c.d = diagnose.Diagnose(s, p)
		c.proc, c.store, c.steps, c.anatomies, c.ended = p, s, n, a, e
	}
	return &c.d
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
