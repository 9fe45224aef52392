package metrics

import (
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/session"
)

// What the diagnosis knows, per process, as numbers an alert rule can
// compare without parsing text (docs/prometheus.md, "What the diagnosis
// knows"). Each comes from diagnose.Diagnose, the entry point the TUI and
// the report read, so no figure can differ between them.
var (
	dNeed       = desc("need_allocated_bytes", "The memory the training needs: the steady state's allocated peak (need_steady 1) or the highest step peak so far; only when known exactly or inferred from an exact step (label peak). A lower bound is vramscope_need_allocated_bound_bytes instead.", procLabels, "peak")
	dNeedBound  = desc("need_allocated_bound_bytes", "A lower bound of the need: some step's peak was not read exactly, so the need is at least this (never the need itself).", procLabels)
	dNeedSteady = desc("need_steady", "1 when the need is the steady state's peak (patterns steady, warmup), 0 when it is the highest peak so far (growth, unknown).", procLabels)
	dDevTotalP  = desc("device_total_bytes", "The memory of the process's device (hello's CUDA total, else NVML's).", procLabels)
	dHeadroom   = desc("headroom_bytes", "The device's memory less what was in use at the need's peak (NVML's device reading while the process ran, else the reserved peak with the non-PyTorch and other processes' memory, else the reserved peak alone).", procLabels)
	dPattern    = desc("pattern_info", "1 for the shape of the step peaks: steady, warmup, growth or unknown.", procLabels, "pattern")
	dGrowth     = desc("growth_bytes_per_step", "While the step peaks keep growing (pattern growth): the least-squares slope of the peaks per step; label kind says what grows: leak (the memory held between steps grows with it), input (the input size grows) or transient.", procLabels, "kind")
	dHeldGrowth = desc("held_growth_bytes_per_step", "While the step peaks keep growing: the slope of the memory held between steps per step (a leak's rate).", procLabels, "kind")
	dOnset      = desc("growth_onset_step", "While the step peaks keep growing: the step where the growth starts (the change point).", procLabels, "kind")
	dLevels     = desc("level_changes", "Rises and falls of the step peaks or held memory to a new level after a steady stretch (the diagnosis's level changes: a larger batch, newly trained or frozen parameters, a buffer kept or let go); 0 when none.", procLabels)
	dLevelStep  = desc("level_change_step", "The step where the newest level change starts (the first step above the old level, or below it for a fall).", procLabels)
	dLevelFrom  = desc("level_change_peak_from_bytes", "The steady peak before the newest level change (the median of that level).", procLabels)
	dLevelTo    = desc("level_change_peak_to_bytes", "The steady peak after the newest level change (the median of the new level).", procLabels)
)

// collectDiagnosis serves what diagnose.Diagnose says about p.
func collectDiagnosis(s *session.Store, p *session.Process, l []string, gauge emit) {
	d := diagnose.Diagnose(s, p)
	with := func(extra string) []string { return append(append([]string{}, l...), extra) }
	gauge(dPattern, 1, with(string(d.Pattern))...)
	n := &d.Need
	if n.Allocated.Known() {
		if n.AllocatedKnown.Is.Stated() {
			gauge(dNeed, float64(n.Allocated), with(n.AllocatedKnown.Is.String())...)
		} else {
			gauge(dNeedBound, float64(n.Allocated), l...)
		}
		steady := 0.0
		if n.Steady {
			steady = 1
		}
		gauge(dNeedSteady, steady, l...)
	}
	if n.DeviceTotal.Known() {
		gauge(dDevTotalP, float64(n.DeviceTotal), l...)
	}
	if n.Headroom.Known() {
		gauge(dHeadroom, float64(n.Headroom), l...)
	}
	gauge(dLevels, float64(len(d.Levels)), l...)
	if n := len(d.Levels); n > 0 {
		lc := &d.Levels[n-1]
		gauge(dLevelStep, float64(lc.Step), l...)
		if lc.PeakFrom.Known() {
			gauge(dLevelFrom, float64(lc.PeakFrom), l...)
		}
		if lc.PeakTo.Known() {
			gauge(dLevelTo, float64(lc.PeakTo), l...)
		}
	}
	if d.Pattern == diagnose.PatternGrowth && d.GrowthKind != "" {
		if d.GrowthPerStep.Known() {
			gauge(dGrowth, float64(d.GrowthPerStep), with(d.GrowthKind)...)
		}
		if d.HeldPerStep.Known() {
			gauge(dHeldGrowth, float64(d.HeldPerStep), with(d.GrowthKind)...)
		}
		if d.GrowthFrom >= 0 {
			gauge(dOnset, float64(d.GrowthFrom), with(d.GrowthKind)...)
		}
	}
}
