package diagnose

import (
	"slices"

	"github.com/vramscope/vramscope/session"
)

// LeakStairs is how many rises of held memory make a staircase a leak, not
// level changes: jumps of the memory held between steps (each more than
// its band above the step before) at a regular pace (the longest gap at
// most twice the shortest, none shorter than LevelMinSteps), held flat
// between them, the last one no further from the run's end than twice the
// longest gap (it still climbs), each at least half unexplained by the
// anatomy's gradients and optimizer state. An evaluation whose outputs
// are appended to a list every N steps rises so; a fine-tune unfrozen in
// stages rises by its gradients and optimizer state, and CUDA graphs
// captured for new sizes stop, and a larger input at every stair is a
// curriculum's (the batch kept on the device between steps). Held memory
// hardly moves with the input (what a step's input makes is freed by its
// end), so inputs that vary from step to step, which move the peaks'
// levels, do not hide the stairs.
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

// heldStairs returns the stairs of the held series hp (heldAsPeaks(pk),
// every step with a held figure) when they make a leak (LeakStairs), and
// the held memory before the first and after the last; nil otherwise.
func heldStairs(p *session.Process, pk, hp []session.StepPeak) (s *Stairs, from, to session.Bytes) {
	band := heldBandOf(pk, hp)
	n := len(hp)
	if !band.Known() || n < 2*LeakStairs*LevelMinSteps {
		return nil, 0, 0
	}
	var at []int // indices into hp of the jumps
	for i := WarmupMaxSteps + 1; i < n; i++ {
		if hp[i].PeakAllocated-hp[i-1].PeakAllocated > band {
			at = append(at, i)
		}
	}
	if len(at) < LeakStairs {
		return nil, 0, 0
	}
	gaps := make([]int, 0, len(at)-1)
	rises := make([]float64, 0, len(at))
	unmeasured, larger := true, 0
	for k, i := range at {
		end, start := n, WarmupMaxSteps
		if k+1 < len(at) {
			end = at[k+1]
			gaps = append(gaps, hp[end].Index-hp[i].Index)
		}
		if k > 0 {
			start = at[k-1]
		}
		if inputGrew(hp[start:i], hp[i:end]) {
			larger++
		}
		// flat from the jump to the next one: a ramp is the leak rule's
		if hi, _, _ := maxOf(hp[i:end]); hi-minPeak(hp[i:end]) > band {
			return nil, 0, 0
		}
		rise := hp[i].PeakAllocated - hp[i-1].PeakAllocated
		rises = append(rises, float64(rise))
		a, b := anatomyAt(p, hp[i-1].Index), anatomyAt(p, hp[end-1].Index)
		if a != nil && b != nil && a != b {
			unmeasured = false
			if explained := gap(b.Gradients, a.Gradients) + gap(b.Optimizer, a.Optimizer); explained > rise/2 {
				return nil, 0, 0
			}
		}
	}
	lo, hi := slices.Min(gaps), slices.Max(gaps)
	last := hp[at[len(at)-1]]
	if lo < LevelMinSteps || hi > 2*lo || hp[n-1].Index-last.Index > 2*hi || larger == len(at) {
		return nil, 0, 0 // (a larger input at every stair: a curriculum's, the batch kept on the device)
	}
	slices.Sort(gaps)
	s = &Stairs{Count: len(at), Every: gaps[len(gaps)/2], Rise: session.Bytes(medianF(rises)),
		First: hp[at[0]].Index, Last: last.Index, Unmeasured: unmeasured}
	return s, hp[at[0]-1].PeakAllocated, medianHeld(pk[indexOf(pk, last.Index):])
}

// stairsLeak sets the growth of a leak in stairs s, the held memory rising
// from from to to, and returns the growing segment of pk: from the first
// rise. Its rates are that rise over the steps the stairs take (a stair
// each Every steps), not a line's slope through them; the peak rises with
// the held memory.
func (d *Diagnosis) stairsLeak(pk []session.StepPeak, s *Stairs, from, to session.Bytes) []session.StepPeak {
	body := pk[indexOf(pk, s.First):]
	rate := session.Bytes(float64(to-from) / float64(s.Count*s.Every))
	d.Pattern, d.GrowthKind, d.Stairs = PatternGrowth, GrowthLeak, s
	d.GrowthFrom, d.GrowthTo = s.First, pk[len(pk)-1].Index
	d.GrowthPerStep, d.HeldPerStep = rate, rate
	d.HeldFrom, d.HeldTo = from, to
	d.PeakAfter, _, _ = maxOf(body)
	return body
}

// inputGrew reports whether the steps after a jump took a larger input
// than those before it (their median tokens, else samples).
func inputGrew(before, after []session.StepPeak) bool {
	for _, tokens := range []bool{true, false} {
		if a, b := medianInput(before, tokens), medianInput(after, tokens); a > 0 && b > 0 {
			return b > a
		}
	}
	return false
}
