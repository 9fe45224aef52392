package diagnose

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Headline is the diagnosis in one line, the banner the TUI shows:
//
//	warmup: peak grew 3482→4329 MiB over steps 0–1 (backward of step 1); steady since step 2
//	steady: peak 4329 MiB since step 0
//	growth: peak +12 MiB/step over steps 0–39 — possible leak
func (d *Diagnosis) Headline() string {
	h := d.pattern()
	if n := len(d.Levels); n > 0 && d.Pattern != PatternGrowth {
		h = d.Levels[n-1].Line() + " · " + h // the newest change that matters
	}
	if d.Source == ipc.SourceCPU {
		h = "host memory (RSS): " + h
	}
	if e := d.End; e != nil && e.Abrupt {
		return e.Lines()[0] + " · " + h
	}
	if e := d.End; e != nil && e.Survived {
		return "out of memory in " + Where(e.OOMStep, e.OOMPhase) + " (caught) · " + h
	}
	if cs := d.Culprits; cs != nil {
		return cs.Headline() + " · " + h
	}
	return h
}

// spreadNote is " (steps vary ±X MiB)" when the run's noise is wider than
// the level tolerance, "" otherwise.
func (d *Diagnosis) spreadNote() string {
	if d.Spread.Known() && session.Bytes(SpreadK*float64(d.Spread)) > Tolerance(d.PeakAfter) {
		return fmt.Sprintf(" (steps vary ±%s MiB)", session.Bytes(SpreadK*float64(d.Spread)).MiBString())
	}
	return ""
}

func (d *Diagnosis) pattern() string {
	k := d.PeakAfterKnown
	note := "" // short: the need line says how it was inferred
	if k.Is == session.Inferred && k.SameAs >= 0 {
		note = fmt.Sprintf(" (inferred from step %d)", k.SameAs)
	}
	switch d.Pattern {
	case PatternSteady:
		return fmt.Sprintf("steady: peak %s since step %d%s%s", k.MiB(d.PeakAfter), d.SteadyFrom, d.spreadNote(), note)
	case PatternGrowth:
		return d.growthLine()
	case PatternWarmup:
		site := Where(d.WarmupStep, d.WarmupPhase)
		if d.warmupHigh {
			return fmt.Sprintf("warmup: first steps peaked at %s MiB (%s), steady peak %s since step %d%s",
				d.WarmupPeak.MiBString(), site, k.MiB(d.PeakAfter), d.SteadyFrom, note)
		}
		grew := d.PeakBefore.MiBString() + "→" + d.PeakAfter.MiBString() + " MiB"
		if !k.Is.Stated() {
			grew = d.PeakBefore.MiBString() + " MiB→" + k.MiB(d.PeakAfter)
		}
		if len(d.Levels) > 0 { // the warmup rose to the first level, not the newest
			grew = d.PeakBefore.MiBString() + "→" + d.Levels[0].PeakFrom.MiBString() + " MiB"
		}
		if r := d.Rise; r != nil {
			// The figures beside the rise are the two steps it compares,
			// so "+N MiB" is their difference.
			rose := r.FromPeak.MiBString() + "→" + r.StepPeak.MiBString() + " MiB"
			return fmt.Sprintf("warmup: %s; steady since step %d%s%s",
				r.line(" ("+rose+", "+site+")"), d.SteadyFrom, d.spreadNote(), note)
		}
		over := fmt.Sprintf("over steps %d–%d", d.FirstStep, d.WarmupEnd-1)
		if d.WarmupEnd-1 <= d.FirstStep {
			over = fmt.Sprintf("after step %d", d.FirstStep)
		}
		return fmt.Sprintf("warmup: peak grew %s %s (%s); steady since step %d%s%s",
			grew, over, site, d.SteadyFrom, d.spreadNote(), note)
	}
	if d.Reason == "" {
		return "unknown"
	}
	return "unknown: " + d.Reason
}

// growthLine is the growth headline, by what grows.
func (d *Diagnosis) growthLine() string {
	over := fmt.Sprintf("+%s/step from step %d (steps %d–%d)", d.GrowthPerStep.Human(), d.GrowthFrom, d.GrowthFrom, d.GrowthTo)
	held := ""
	if d.HeldFrom.Known() {
		held = fmt.Sprintf("memory held between steps %s→%s MiB", d.HeldFrom.MiBString(), d.HeldTo.MiBString())
	}
	switch d.GrowthKind {
	case GrowthInput:
		return fmt.Sprintf("growth: peak grows with %s size: %s per %s (%s) — not a leak", inputNoun(d.InputUnit), perHuman(d.PerInput), d.InputUnit, over)
	case GrowthTransient:
		return fmt.Sprintf("growth: peak %s in memory freed every step (%s): it follows the input size (batch, sequence length) or the work per step, not a leak", over, held)
	case GrowthHostInput:
		return fmt.Sprintf("growth: peak %s follows the input (%d→%d %s); the process keeps memory it freed, so RSS does not fall back — not a leak", over, d.InputFrom, d.InputTo, d.InputUnit)
	case GrowthHostUnknown:
		return fmt.Sprintf("growth: peak %s; the hook reported no input size, so a growing input cannot be told from a leak (the process keeps memory it freed: RSS does not fall back) — not called a leak", over)
	}
	if held != "" {
		return fmt.Sprintf("growth: peak %s — possible leak: %s (+%s/step)", over, held, d.HeldPerStep.Human())
	}
	return fmt.Sprintf("growth: peak %s — possible leak", over)
}

// stairsLine says how a leak in stairs rises, which user phase runs at its
// pace, and whether the anatomy was measured at the stairs: "it rises in
// stairs of +1571 MiB every 20 steps (19 of them, steps 20–380), as eval
// runs every 20 steps: look at what it keeps".
func (d *Diagnosis) stairsLine() string {
	s := d.Stairs
	note := fmt.Sprintf("it rises in stairs of +%s MiB every %d steps (%d of them, steps %d–%d)", s.Rise.MiBString(), s.Every, s.Count, s.First, s.Last)
	for i := range d.Phases {
		if u := &d.Phases[i]; u.Every == s.Every {
			note += fmt.Sprintf(", as %s runs every %d steps: look at what it keeps", u.Name, u.Every)
			break
		}
	}
	if s.Unmeasured {
		note += " (the anatomy was not measured at them: a fine-tune unfrozen in stages would rise so too)"
	}
	return note
}

// perHuman prints a per-sample or per-token size in MiB with up to two
// decimals ("0.5 MiB"), in KiB below 0.01 MiB.
func perHuman(b session.Bytes) string {
	if b < session.MiB/100 {
		return b.Human()
	}
	return strconv.FormatFloat(math.Round(float64(b)/session.MiB*100)/100, 'f', -1, 64) + " MiB"
}

func inputNoun(unit string) string {
	if unit == "token" {
		return "token count"
	}
	return "batch"
}

// Lines are the diagnosis lines shown under the chart and in the text
// report: the headline, the peak and what dominates it, the first step's
// causes, the optimizer spike, the memory needed and the advice.
func (d *Diagnosis) Lines() []string {
	if d.Source == ipc.SourceCPU {
		return d.hostLines()
	}
	lines := make([]string, 0, 8+len(d.Advice))
	lines = append(lines, d.pattern())
	if d.Pattern == PatternGrowth && d.Stairs != nil {
		lines = append(lines, d.stairsLine())
	}
	if d.Turn > 0 {
		lines = append(lines, fmt.Sprintf("its watched models take turns, %d steps a turn: each turn is read as one step, at its highest step's peak and with the memory held after its last step", d.Turn))
	}
	if cs := d.Culprits; cs != nil {
		lines = append(lines, cs.Lines()...)
	}
	if d.Pattern != PatternGrowth {
		for i := len(d.Levels) - 1; i >= 0; i-- {
			lines = append(lines, d.Levels[i].Line())
		}
	}
	if e := d.End; e != nil {
		lines = append(lines, e.Lines()...)
	}
	if a := d.AtOOM; a != nil {
		lines = append(lines, a.Lines()...)
	}
	lines = append(lines, d.unupdatedLines()...)
	for i := range d.Phases {
		lines = append(lines, d.Phases[i].Line())
	}
	if pk := d.Peak; pk.Step >= 0 {
		alloc := pk.Allocated.MiBString() + " MiB"
		if !pk.Exact {
			alloc = "≥ " + alloc + " (not exact)"
		}
		line := fmt.Sprintf("session peak %s allocated, %s MiB reserved, in %s", alloc, pk.Reserved.MiBString(), pk.Where())
		if share, ok := shareOf(pk.DominantBytes, pk.Allocated); ok {
			line += fmt.Sprintf("; largest part: %s %s MiB (%.0f%%)", pk.Dominant, pk.DominantBytes.MiBString(), 100*share)
		}
		lines = append(lines, line)
	}
	if n := d.Need; n.Allocated.Known() {
		kind := "highest"
		if n.Steady {
			kind = "steady"
		}
		line := fmt.Sprintf("needed (%s peak): %s allocated, %s MiB reserved", kind, n.AllocatedKnown.MiB(n.Allocated), n.Reserved.MiBString())
		if note := n.AllocatedKnown.Note(); note != "" {
			line += " (" + note + ")"
		}
		if n.PhasePeak.Known() {
			line += fmt.Sprintf("; %s needs more: %s MiB allocated", n.PhaseName, n.PhasePeak.MiBString())
		}
		if n.Headroom.Known() {
			of := n.DeviceTotal
			if n.Allowed.Known() {
				of = n.Allowed
			}
			line += fmt.Sprintf("; headroom %s of %s MiB (used: %s)", n.Headroom.MiBString(), of.MiBString(), n.UsedBasis)
		}
		lines = append(lines, line)
	}
	if line := d.Held.Line(); line != "" {
		lines = append(lines, line)
	}
	if b := d.Need.Batch; b != nil {
		if b.Capped {
			lines = append(lines, fmt.Sprintf("estimate: batch %d (%d× the measured %d, where the estimate stops) or more fits if activations scale linearly with the batch (%s per sample)",
				b.Max, BatchCapFactor, b.Current, b.PerSample.Human()))
		} else {
			lines = append(lines, fmt.Sprintf("estimate: batch up to ~%d (measured %d) if activations scale linearly with the batch (%s per sample)", b.Max, b.Current, b.PerSample.Human()))
		}
	}
	if c := d.Causes; c.OptimizerCreated > 0 {
		line := fmt.Sprintf("step %d: optimizer step allocated %s MiB", c.Step, c.OptimizerCreated.MiBString())
		switch {
		case c.OptimizerMatched:
			line += fmt.Sprintf(": the optimizer state (anatomy: %s MiB)", c.OptimizerAnatomy.MiBString())
		case c.OptimizerAnatomy.Known():
			line += fmt.Sprintf(" (anatomy counts %s MiB of optimizer state)", c.OptimizerAnatomy.MiBString())
		}
		lines = append(lines, line)
	}
	if c := d.Causes; c.Step >= 0 {
		if line := firstStepLine(c.Step, d.FirstStepPhase); line != "" {
			lines = append(lines, line)
		}
	}
	var grew []string
	if c := d.Causes; c.CacheGrowth >= CauseMin {
		grew = append(grew, "allocator cache +"+c.CacheGrowth.MiBString()+" MiB")
	}
	if c := d.Causes; c.NonPyTorchGrowth >= CauseMin {
		grew = append(grew, "non-PyTorch memory +"+c.NonPyTorchGrowth.MiBString()+" MiB (kernels, cuBLAS workspace)")
	}
	if len(grew) > 0 {
		lines = append(lines, "warmup also grew: "+strings.Join(grew, ", "))
	}
	if o := d.Spike; o.Reported {
		lines = append(lines, fmt.Sprintf("optimizer step spike: +%s MiB over its start (%s → %s MiB, step %d): temporaries of optimizer.step()",
			o.Bytes.MiBString(), o.Start.MiBString(), o.Peak.MiBString(), o.Step))
	}
	for _, a := range d.Advice {
		lines = append(lines, "→ "+a.Text+" — because "+a.Because)
	}
	return lines
}

// Where says where the session peak happened: its phase, one taken from
// the breakdown step a step read once repeats, or that it is not known.
func (pk PeakSite) Where() string { return PeakWhere(pk.Step, pk.Phase, pk.PhaseAs) }

// PeakWhere says where a peak happened: the phase of step, one taken from
// the step phaseAs it repeats (-1: its own), or that the phase is not known.
func PeakWhere(step int, phase string, phaseAs int) string {
	switch {
	case step >= 0 && phase == "":
		return fmt.Sprintf("step %d (its phase is not known)", step)
	case phaseAs >= 0:
		return fmt.Sprintf("%s (read once: the phases of step %d, which it repeats)", Where(step, phase), phaseAs)
	}
	return Where(step, phase)
}

// Where names a phase of a step: "backward of step 1", "optimizer step of
// step 1" (the phase called step), "step 1" without a phase, "–" without a
// step.
func Where(step int, phase string) string {
	switch {
	case step < 0:
		return "–"
	case phase == "":
		return fmt.Sprintf("step %d", step)
	case phase == "step":
		phase = "optimizer step"
	}
	return fmt.Sprintf("%s of step %d", phase, step)
}
