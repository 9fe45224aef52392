package diagnose

import (
	"slices"

	"github.com/vramscope/vramscope/session"
)

// LeakStairs is how many rises of held memory make a staircase a leak,
// not level changes: each rise unexplained by gradients, optimizer state
// or the input, at a regular pace (the longest gap at most twice the
// shortest), the last one no further from the run's end than twice the
// longest gap (it still climbs). An evaluation whose outputs are appended
// to a list every N steps rises so; a fine-tune unfrozen in stages rises
// by its gradients and optimizer state, and CUDA graphs captured for new
// sizes stop.
const LeakStairs = 3

// Stairs describes a leak that rises in stairs: Count rises of held
// memory, Every steps apart and Rise each (medians), the first at step
// First, the last at Last. Unmeasured: the anatomy was measured about
// none of them (no gradients or optimizer state to compare), so a
// fine-tune unfrozen in stages, which rises so too, is not ruled out.
type Stairs struct {
	Count      int           `json:"count"`
	Every      int           `json:"every"`
	Rise       session.Bytes `json:"rise"`
	First      int           `json:"first"`
	Last       int           `json:"last"`
	Unmeasured bool          `json:"unmeasured"`
}

// leakStairs returns the stairs of levels (levelChanges of pk) when they
// make a leak (LeakStairs), nil otherwise.
func leakStairs(pk []session.StepPeak, levels []LevelChange) *Stairs {
	n := len(levels)
	if n < LeakStairs {
		return nil
	}
	gaps := make([]int, 0, n-1)
	rises := make([]float64, 0, n)
	unmeasured := true
	for k, l := range levels {
		unmeasured = unmeasured && !l.Gradients.Known()
		rise := l.HeldTo - l.HeldFrom
		if !l.HeldFrom.Known() || !l.HeldTo.Known() || rise <= 0 || l.InputTo != l.InputFrom ||
			!l.Unexplained.Known() || l.Unexplained < rise/2 {
			return nil
		}
		rises = append(rises, float64(rise))
		if k > 0 {
			gaps = append(gaps, l.Step-levels[k-1].Step)
		}
	}
	lo, hi := slices.Min(gaps), slices.Max(gaps)
	if lo <= 0 || hi > 2*lo || pk[len(pk)-1].Index-levels[n-1].Step > 2*hi {
		return nil
	}
	slices.Sort(gaps)
	return &Stairs{Count: n, Every: gaps[len(gaps)/2], Rise: session.Bytes(medianF(rises)),
		First: levels[0].Step, Last: levels[n-1].Step, Unmeasured: unmeasured}
}

// stairsLeak sets the growth of a leak in stairs s over the level changes
// levels of pk, and returns the growing segment: from the first rise. Its
// rates are the rise from the first level to the last over the steps the
// stairs take (a stair each Every steps), not a line's slope through them.
func (d *Diagnosis) stairsLeak(pk []session.StepPeak, levels []LevelChange, s *Stairs) []session.StepPeak {
	first, last := levels[0], levels[len(levels)-1]
	steps := float64(s.Count * s.Every)
	body := pk[indexOf(pk, s.First):]
	d.Pattern, d.GrowthKind, d.Stairs = PatternGrowth, GrowthLeak, s
	d.GrowthFrom, d.GrowthTo = s.First, pk[len(pk)-1].Index
	d.GrowthPerStep = session.Bytes(float64(last.PeakTo-first.PeakFrom) / steps)
	d.HeldPerStep = session.Bytes(float64(last.HeldTo-first.HeldFrom) / steps)
	d.HeldFrom, d.HeldTo = first.HeldFrom, last.HeldTo
	d.PeakAfter, _, _ = maxOf(body)
	return body
}
