package diagnose

import (
	"fmt"
	"math"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// Level changes: after a steady stretch, the steady peak or the memory
// held between steps rises to a new level and stays there (a fine-tune
// unfreezes its backbone, a scheduler doubles the batch, a CUDA graph's
// pool is captured). It is neither a warmup (which only the first steps
// make) nor a leak (which keeps rising). Once the run is known not to
// grow, a fall to a lower level that stays there is one too (layers
// frozen, the batch halved, a teacher model let go).

// LevelWindow is how many steps of a level its figure is read from (their
// median), so a long run costs no more than a short one; LevelMinSteps how
// long a level must have held (from where it settled) before a rise from it
// is a level change: a staircase of shorter stairs is growth.
const (
	LevelWindow   = 16
	LevelMinSteps = 5
)

// LevelChange is one rise (or, Fall, one fall) to a new level, with its
// causes in numbers.
type LevelChange struct {
	// Fall is set for a fall to a lower level.
	Fall bool `json:"fall,omitempty"`
	// Step is the first step above the old level; Settled the first step
	// of the new level (a change, like a warmup, may take up to
	// WarmupMaxSteps steps: optimizer state is made in the first step's
	// update and shows in the next).
	Step    int `json:"step"`
	Settled int `json:"settled"`
	// PeakFrom and PeakTo are the steady peak before and after (medians of
	// each level), HeldFrom and HeldTo the memory held between steps.
	PeakFrom session.Bytes `json:"peak_from"`
	PeakTo   session.Bytes `json:"peak_to"`
	HeldFrom session.Bytes `json:"held_from"`
	HeldTo   session.Bytes `json:"held_to"`
	// Causes: the anatomy's gradients and optimizer state before and
	// after (newly trained parameters), the input size before and after
	// (tokens, else samples; 0 when the same or unknown), and the held
	// memory they leave unexplained (a new buffer kept across steps).
	// Sizes of the change: for a fall, what was let go.
	Gradients   session.Bytes `json:"gradients"`
	Optimizer   session.Bytes `json:"optimizer"`
	InputFrom   int64         `json:"input_from"`
	InputTo     int64         `json:"input_to"`
	InputUnit   string        `json:"input_unit"`
	Unexplained session.Bytes `json:"unexplained"`
}

// levelChanges finds the rises to a new level in pk after its first
// start steps (WarmupMaxSteps, or where a longer warmup ended): a step
// whose peak passes the current level by more than band, or whose held
// memory passes the level's held memory by more than its own band, where
// the steps after it (up to LevelWindow, at least SteadyMinSteps) have
// their median above too (a spike is not a level). With falls, the same
// below the level finds the falls too. hp is heldAsPeaks(pk).
func levelChanges(p *session.Process, pk, hp []session.StepPeak, band session.Bytes, start int, falls bool) []LevelChange {
	n := len(pk)
	if n < start+2*SteadyMinSteps+1 {
		return nil
	}
	heldBand := heldBandOf(pk, hp)
	vary := varyingInput(pk[start:]) // nil unless the input varies step to step
	first := start
	var byInput []bool // which changes of out the input's own level made
	// above and below: a over b by more than the band, held memory by its own
	above := func(a, b, ha, hb session.Bytes) bool {
		return a > b+band || heldBand.Known() && ha.Known() && hb.Known() && ha > hb+heldBand
	}
	below := func(a, b, ha, hb session.Bytes) bool { return falls && above(b, a, hb, ha) }
	var out []LevelChange
	// The level: the median of its window, and for a fall its lowest step,
	// which a falling step and the new level must be below (the level's
	// own noise is not a fall)
	var lv, hv, lo, hlo session.Bytes
	for i := start + LevelMinSteps; i < n-SteadyMinSteps; i++ {
		if i-start <= LevelWindow { // the level's window is full after that: read once
			win := pk[start:i]
			lv, hv = median(win), medianHeld(win)
			lo, hlo = minPeak(win), minHeld(win)
		}
		// The level after it, not single steps: a run whose noise is
		// skewed (most steps at a floor, some above) passes lv+band now and
		// then without moving its median.
		// Near the end, with fewer steps to tell by, every one must be
		// above (below, for a fall).
		next := pk[i+1 : min(i+1+LevelWindow, n)]
		// (the step itself first: most steps stay at the level, and the
		// window after them is read only for one that moved)
		moved := func(up bool) bool {
			if up && !above(pk[i].PeakAllocated, lv, pk[i].Held, hv) ||
				!up && !below(pk[i].PeakAllocated, lo, pk[i].Held, hlo) {
				return false
			}
			peakTo, heldTo := median(next), medianHeld(next)
			if up {
				if len(next) < LevelWindow {
					peakTo, heldTo = minPeak(next), minHeld(next)
				}
				return above(peakTo, lv, heldTo, hv)
			}
			if len(next) < LevelWindow {
				peakTo, _, _ = maxOf(next)
				heldTo = maxHeld(next)
			}
			return below(peakTo, lo, heldTo, hlo)
		}
		// a step above in its peak may be below in its held memory (a
		// long batch in the step whose update let go of state)
		up := moved(true)
		down := !up && moved(false)
		fromInput := false
		if vary != nil {
			// Inputs that vary step to step: a change of the input's own
			// level is one, at its sharpest split (inputLevelAt); the peaks
			// alone moving is one only beyond what the input explains
			// (explainedByInput), the step itself and the steps after it.
			win := pk[max(start, i-LevelWindow):i]
			if j, rise, ok := inputLevelAt(pk, i, start, vary, falls); ok {
				i, up, fromInput = j, rise, true
			} else if !up && !down ||
				!heldMoved(pk[i:i+1], hv, hlo, heldBand, up) && explainedByInput(win, pk[i:i+1], vary, band, up) ||
				!heldMoved(next, hv, hlo, heldBand, up) && explainedByInput(win, next, vary, band, up) {
				continue
			}
		} else if !up && !down {
			continue
		}
		// Settled: the first step from which the next ones move on no more.
		settled := i
		for s := i + 1; s < min(i+WarmupMaxSteps, n); s++ {
			a, b, ha, hb := pk[s].PeakAllocated, pk[s-1].PeakAllocated, pk[s].Held, pk[s-1].Held
			if up && above(a, b, ha, hb) || !up && below(a, b, ha, hb) {
				settled = s
			}
		}
		out = append(out, LevelChange{Fall: !up, Step: pk[i].Index, Settled: pk[settled].Index, PeakFrom: lv, HeldFrom: hv})
		byInput = append(byInput, fromInput)
		start = settled
		i = settled + LevelMinSteps - 1
	}
	if vary != nil {
		out = inputLevelsFlat(pk, first, out, byInput, vary)
	}
	finishLevels(p, pk, out)
	return out
}

// heldMoved reports whether the median held memory of next passed the
// level's (hv; for a fall, its lowest, hlo) by more than heldBand, up or
// down.
func heldMoved(next []session.StepPeak, hv, hlo, heldBand session.Bytes, up bool) bool {
	h := medianHeld(next)
	if !heldBand.Known() || !h.Known() || !hv.Known() || !hlo.Known() {
		return false
	}
	if up {
		return h > hv+heldBand
	}
	return h+heldBand < hlo
}

// anyFall reports whether one of levels is a fall.
func anyFall(levels []LevelChange) bool {
	for i := range levels {
		if levels[i].Fall {
			return true
		}
	}
	return false
}

// finishLevels reads each change's new level (up to LevelWindow steps from
// where it settled, before the next change) and its causes.
func finishLevels(p *session.Process, pk []session.StepPeak, out []LevelChange) {
	for k := range out {
		c := &out[k]
		from, to := indexOf(pk, c.Settled), len(pk)
		if k+1 < len(out) {
			to = indexOf(pk, out[k+1].Step)
		}
		win := pk[from:min(from+LevelWindow, to)]
		c.PeakTo, c.HeldTo = median(win), medianHeld(win)
		before := pk[max(WarmupMaxSteps, indexOf(pk, c.Step)-LevelWindow):indexOf(pk, c.Step)]
		c.causes(p, before, win)
	}
}

// joinRamps returns levels with each run of changes that follow one
// another as soon as a new level may (each within LevelMinSteps of where
// the last settled) made one: a rise over many steps that then stops (a
// cache that fills, memory kept for a while) is one change, from the
// first's step and level to where the last settled, its causes read over
// those; read one by one it was a change every 5 steps, each of a few MiB.
// A rise that has not stopped is the growth rules' (they read levels
// unjoined).
func joinRamps(p *session.Process, pk []session.StepPeak, levels []LevelChange) []LevelChange {
	if len(levels) < 2 {
		return levels
	}
	out := make([]LevelChange, 0, len(levels))
	joined := false
	for k := 0; k < len(levels); {
		j := k
		for j+1 < len(levels) && levels[j+1].Step <= levels[j].Settled+LevelMinSteps && levels[j+1].Fall == levels[k].Fall {
			j++
		}
		c := levels[k]
		if j > k {
			c.Settled, joined = levels[j].Settled, true
		}
		out = append(out, c)
		k = j + 1
	}
	if joined {
		finishLevels(p, pk, out)
	}
	return out
}

// heldBandOf is the band of the held series hp (heldAsPeaks(pk)): its
// tolerance or SpreadK of its own noise; Unknown when a step has no held
// figure.
func heldBandOf(pk, hp []session.StepPeak) session.Bytes {
	if len(hp) < MinSteps || len(hp) != len(pk) {
		return session.Unknown
	}
	return max(Tolerance(median(hp)), session.Bytes(math.Round(SpreadK*noise(hp))))
}

// levelsExplain reports whether the level changes explain the run's rise:
// every level (the first from WarmupMaxSteps, each later one from where it
// settled, up to the next change) is flat by the growth rule's own test
// (its peaks), and its held memory has no significant slope. A leak climbs within its levels; a
// staircase of level changes does not.
func levelsExplain(pk, hp []session.StepPeak, levels []LevelChange, band session.Bytes) bool {
	if len(levels) == 0 {
		return false
	}
	heldBand := heldBandOf(pk, hp)
	from := WarmupMaxSteps
	for k := 0; k <= len(levels); k++ {
		to := len(pk)
		if k < len(levels) {
			to = indexOf(pk, levels[k].Step)
		}
		run := pk[min(from, to):to]
		// A level is flat: its held memory stays within its band (within-step
		// noise does not move it), its peaks' second half sits where its
		// first half does, and neither has a significant slope.
		if len(run) < 2 {
			return false
		}
		if lo, hi := minHeld(run), maxHeld(run); heldBand.Known() && lo.Known() && hi-lo > heldBand {
			return false
		}
		if absDiff(median(run[len(run)/2:]), median(run[:len(run)/2])) > band {
			return false
		}
		if b, t := fit(run, false); b >= float64(MinGrowthPerStep) && t >= GrowthMinT && b*float64(len(run)) > float64(band) {
			return false
		}
		if b, t := fit(run, true); b >= float64(MinGrowthPerStep) && t >= GrowthMinT {
			return false
		}
		if k < len(levels) {
			from = indexOf(pk, levels[k].Settled)
		}
	}
	return true
}

// causes puts the change in numbers: the anatomy's gradients and
// optimizer state at the old level and the new one, the input sizes, and
// what of the held memory's rise they leave unexplained.
func (c *LevelChange) causes(p *session.Process, before, after []session.StepPeak) {
	c.Gradients, c.Optimizer, c.Unexplained = session.Unknown, session.Unknown, session.Unknown
	// by: how far a figure moved in the change's direction (0 the other way)
	by := gap
	if c.Fall {
		by = func(to, from session.Bytes) session.Bytes { return gap(from, to) }
	}
	a, b := anatomyAt(p, before[len(before)-1].Index), anatomyAt(p, after[len(after)-1].Index)
	if a != nil && b != nil && a != b {
		c.Gradients, c.Optimizer = by(b.Gradients, a.Gradients), by(b.Optimizer, a.Optimizer)
	}
	inFrom, inTo, unit := medianInput(before, true), medianInput(after, true), "tokens"
	if inFrom <= 0 || inTo <= 0 {
		inFrom, inTo, unit = medianInput(before, false), medianInput(after, false), "samples"
	}
	if inFrom > 0 && inTo > 0 && inFrom != inTo {
		c.InputFrom, c.InputTo, c.InputUnit = inFrom, inTo, unit
	}
	if rise := by(c.HeldTo, c.HeldFrom); rise.Known() {
		explained := session.Bytes(0)
		if c.Gradients.Known() {
			explained += c.Gradients + c.Optimizer
		}
		c.Unexplained = gap(rise, explained)
	}
}

// Line is "level change at step 100: peak 1491→11499 MiB, held
// 1191→4662 MiB: gradients +1152, optimizer state +2304 MiB, ..."; the
// change, where it settled and what made it.
func (c *LevelChange) Line() string {
	s := fmt.Sprintf("level change at step %d: peak %s→%s MiB", c.Step, c.PeakFrom.MiBString(), c.PeakTo.MiBString())
	if c.HeldFrom.Known() && c.HeldTo.Known() && absDiff(c.HeldTo, c.HeldFrom) > Tolerance(max(c.HeldTo, c.HeldFrom)) {
		s += fmt.Sprintf(", held between steps %s→%s MiB", c.HeldFrom.MiBString(), c.HeldTo.MiBString())
	}
	// what moved by more than the tolerance, signed by the change's direction
	tol := Tolerance(max(c.HeldTo, c.HeldFrom))
	moved := func(b session.Bytes) bool { return b.Known() && b > tol }
	sign := "+"
	if c.Fall {
		sign = "−"
	}
	var why []string
	if moved(c.Gradients) {
		why = append(why, "gradients "+sign+c.Gradients.MiBString()+" MiB")
	}
	if moved(c.Optimizer) {
		trained := "newly trained parameters"
		if c.Fall {
			trained = "fewer parameters trained, or state let go"
		}
		why = append(why, "optimizer state "+sign+c.Optimizer.MiBString()+" MiB ("+trained+")")
	}
	if c.InputTo > 0 {
		why = append(why, fmt.Sprintf("input %d→%d %s (%.1f×)", c.InputFrom, c.InputTo, c.InputUnit, float64(c.InputTo)/float64(c.InputFrom)))
	}
	if moved(c.Unexplained) {
		if c.Fall {
			why = append(why, "no longer kept across steps −"+c.Unexplained.MiBString()+" MiB (a buffer let go, or state the anatomy does not count)")
		} else {
			why = append(why, "kept across steps +"+c.Unexplained.MiBString()+" MiB (a new buffer, or state the anatomy does not count)")
		}
	}
	if len(why) > 0 {
		s += ": " + strings.Join(why, ", ")
	}
	if c.Settled != c.Step {
		s += fmt.Sprintf("; settled by step %d", c.Settled)
	}
	if c.Fall {
		return s + " — it stays at its new, lower level"
	}
	return s + " — not a leak: it stays at its new level"
}

// medianHeld is the median held memory of pk, Unknown when a step has none.
func medianHeld(pk []session.StepPeak) session.Bytes {
	v := make([]float64, 0, len(pk))
	for i := range pk {
		if !pk[i].Held.Known() {
			return session.Unknown
		}
		v = append(v, float64(pk[i].Held))
	}
	if len(v) == 0 {
		return session.Unknown
	}
	return session.Bytes(math.Round(medianF(v)))
}

// medianInput is the median input size (tokens, else batch) of pk, 0 when
// a step has none.
func medianInput(pk []session.StepPeak, tokens bool) int64 {
	v := make([]float64, 0, len(pk))
	for i := range pk {
		x := pk[i].Batch
		if tokens {
			x = pk[i].Tokens
		}
		if x <= 0 {
			return 0
		}
		v = append(v, float64(x))
	}
	if len(v) == 0 {
		return 0
	}
	return int64(math.Round(medianF(v)))
}

// indexOf is the position in pk of the step numbered index (pk is in step
// order), len(pk) when absent.
func indexOf(pk []session.StepPeak, index int) int {
	for i := range pk {
		if pk[i].Index >= index {
			return i
		}
	}
	return len(pk)
}

// minHeld is the least held memory of pk, Unknown when a step has none.
func minHeld(pk []session.StepPeak) session.Bytes {
	v := session.Unknown
	for i := range pk {
		if !pk[i].Held.Known() {
			return session.Unknown
		}
		if !v.Known() || pk[i].Held < v {
			v = pk[i].Held
		}
	}
	return v
}

// minPeak is the least allocated peak of pk (not empty).
func minPeak(pk []session.StepPeak) session.Bytes {
	v := pk[0].PeakAllocated
	for i := range pk {
		v = min(v, pk[i].PeakAllocated)
	}
	return v
}

// maxHeld is the most held memory of pk, Unknown when a step has none.
func maxHeld(pk []session.StepPeak) session.Bytes {
	v := session.Unknown
	for i := range pk {
		if !pk[i].Held.Known() {
			return session.Unknown
		}
		v = v.Max(pk[i].Held)
	}
	return v
}
