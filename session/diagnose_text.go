package session

import (
	"fmt"
	"strings"
)

// Headline is the diagnosis in one line, the banner the TUI shows:
//
//	warmup: peak grew 3482→4329 MiB over steps 0–1 (backward of step 1); steady since step 2
//	steady: peak 4329 MiB since step 0
//	growth: peak +12 MiB/step over steps 0–39 — possible leak
func (d *Diagnosis) Headline() string {
	switch d.Pattern {
	case PatternSteady:
		return fmt.Sprintf("steady: peak %s MiB since step %d", d.PeakAfter.MiBString(), d.SteadyFrom)
	case PatternGrowth:
		return fmt.Sprintf("growth: peak +%s/step over steps %d–%d — possible leak", d.GrowthPerStep.Human(), d.GrowthFrom, d.GrowthTo)
	case PatternWarmup:
		site := Where(d.WarmupStep, d.WarmupPhase)
		if d.WarmupPeak > d.PeakAfter+Tolerance(d.PeakAfter) {
			return fmt.Sprintf("warmup: first steps peaked at %s MiB (%s), steady peak %s MiB since step %d",
				d.WarmupPeak.MiBString(), site, d.PeakAfter.MiBString(), d.SteadyFrom)
		}
		return fmt.Sprintf("warmup: peak grew %s→%s MiB over steps %d–%d (%s); steady since step %d",
			d.PeakBefore.MiBString(), d.PeakAfter.MiBString(), d.FirstStep, d.SteadyFrom-1, site, d.SteadyFrom)
	}
	if d.Reason == "" {
		return "unknown"
	}
	return "unknown: " + d.Reason
}

// Lines are the diagnosis lines shown under the chart and in the text
// report: the headline, the peak and what dominates it, the first step's
// causes, the optimizer spike, the memory needed and the advice.
func (d *Diagnosis) Lines() []string {
	lines := make([]string, 0, 8+len(d.Advice))
	lines = append(lines, d.Headline())
	if pk := d.Peak; pk.Step >= 0 {
		bound := ""
		if !pk.Exact {
			bound = " (at least)"
		}
		line := fmt.Sprintf("session peak %s MiB allocated%s, %s MiB reserved, in %s", pk.Allocated.MiBString(), bound, pk.Reserved.MiBString(), Where(pk.Step, pk.Phase))
		if share, ok := shareOf(pk.DominantBytes, pk.Allocated); ok {
			line += fmt.Sprintf("; largest part: %s %s MiB (%.0f%%)", pk.Dominant, pk.DominantBytes.MiBString(), 100*share)
		}
		lines = append(lines, line)
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
		lines = append(lines, fmt.Sprintf("optimizer step spike: +%s MiB over its start (%s → %s MiB, step %d): foreach/fused temporaries",
			o.Bytes.MiBString(), o.Start.MiBString(), o.Peak.MiBString(), o.Step))
	}
	if n := d.Need; n.Allocated.Known() {
		kind := "highest"
		if n.Steady {
			kind = "steady"
		}
		line := fmt.Sprintf("needed (%s peak): %s MiB allocated, %s MiB reserved", kind, n.Allocated.MiBString(), n.Reserved.MiBString())
		if n.Headroom.Known() {
			line += fmt.Sprintf("; headroom %s of %s MiB (used: %s)", n.Headroom.MiBString(), n.DeviceTotal.MiBString(), n.UsedBasis)
		}
		lines = append(lines, line)
	}
	if b := d.Need.Batch; b != nil {
		lines = append(lines, fmt.Sprintf("estimate: batch up to ~%d (now %d) if activations scale linearly with the batch (%s per sample)", b.Max, b.Current, b.PerSample.Human()))
	}
	for _, a := range d.Advice {
		lines = append(lines, "→ "+a.Text+" — because "+a.Because)
	}
	return lines
}
