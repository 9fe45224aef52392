package diagnose

import (
	"math"
	"slices"

	"github.com/vramscope/vramscope/session"
)

// Inputs that vary from one step to the next (dynamic padding, packed
// batches of drawn lengths) move each step's peak with them. A window of
// such steps has a median that wanders with the lengths drawn into it,
// and a sawtooth of lengths has step-to-step differences so alike that
// the noise read from them is near nothing. Neither is a level change:
// a change of the peaks alone, in such a run, is one only where the
// input's own level moved or the peaks moved beyond what the input
// explains.

// VaryingInputShare is the share of steps whose input size differs from
// the step before's above which a run's input varies step to step (an
// epoch's short last batch, or a batch-size schedule, changes it far
// more rarely).
const VaryingInputShare = 0.25

// varyingInput returns the input size of a step of pk (tokens where every
// step has them, else samples) when it varies step to step
// (VaryingInputShare); nil otherwise.
func varyingInput(pk []session.StepPeak) func(*session.StepPeak) int64 {
	if len(pk) < 2 {
		return nil
	}
	for _, x := range []func(*session.StepPeak) int64{
		func(s *session.StepPeak) int64 { return s.Tokens },
		func(s *session.StepPeak) int64 { return s.Batch },
	} {
		changes, known := 0, true
		for i := range pk {
			if x(&pk[i]) <= 0 {
				known = false
				break
			}
			if i > 0 && x(&pk[i]) != x(&pk[i-1]) {
				changes++
			}
		}
		if known {
			if float64(changes) >= VaryingInputShare*float64(len(pk)-1) {
				return x
			}
			return nil
		}
	}
	return nil
}

// explainedByInput reports whether the peaks of next, the steps after a
// level's window win, moved (up, or down) only as far as the input
// explains: the input varies within win, and the peaks less a
// least-squares line of peak on input over win have a median in next
// within band of their median in win. (A move of the input's own level
// is inputLevelAt's.)
func explainedByInput(win, next []session.StepPeak, x func(*session.StepPeak) int64, band session.Bytes, up bool) bool {
	if len(next) == 0 || inputsWithin(win, win[:1], x) { // none, or one input all through win
		return false
	}
	d := adjustedRise(win, next, x)
	if !up {
		d = -d
	}
	return d <= float64(band)
}

// adjustedRise is how far the peaks of next lie above those of win (the
// steps before) beyond what the input explains: the medians of each
// step's peak less a least-squares line of peak on input (x) over win.
// With no input variation in win it is the rise of the medians.
func adjustedRise(win, next []session.StepPeak, x func(*session.StepPeak) int64) float64 {
	xs := make([]float64, len(win))
	ys := make([]float64, len(win))
	for i := range win {
		xs[i], ys[i] = float64(x(&win[i])), float64(win[i].PeakAllocated)
	}
	slope, _ := regress(xs, ys)
	rest := func(pk []session.StepPeak) float64 {
		v := make([]float64, len(pk))
		for i := range pk {
			v[i] = float64(pk[i].PeakAllocated) - slope*float64(x(&pk[i]))
		}
		return medianF(v)
	}
	return rest(next) - rest(win)
}

// inputsWithin reports whether every input of seg lies within the range
// of inputs of before.
func inputsWithin(seg, before []session.StepPeak, x func(*session.StepPeak) int64) bool {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range before {
		lo, hi = min(lo, x(&before[i])), max(hi, x(&before[i]))
	}
	for i := range seg {
		if v := x(&seg[i]); v < lo || v > hi {
			return false
		}
	}
	return true
}

// inputLevelAt finds a change of the input's own level at step i of pk (a
// batch-size schedule in a run of drawn lengths): the median input of the
// LevelWindow steps from i lies beyond the upper quartile of the inputs of
// the level's window before it (up to LevelWindow steps after start), or,
// with falls, below its lower quartile. The change is placed at the
// sharpest split within a window after i: the step j where the mean
// inputs of the windows before and from it differ most (the first such;
// means, which a window of a periodic pattern's whole periods holds
// still, where a median moves with the phase); or where the batch
// (samples) changed in that window and stayed, at that step. Returns j, whether it rose, and whether there is one.
func inputLevelAt(pk []session.StepPeak, i, start int, x func(*session.StepPeak) int64, falls bool) (int, bool, bool) {
	const w = LevelWindow
	win := pk[max(start, i-w):i]
	if len(win) < w || len(pk)-i < w {
		return 0, false, false
	}
	inputs := func(pk []session.StepPeak) []float64 {
		v := make([]float64, len(pk))
		for k := range pk {
			v[k] = float64(x(&pk[k]))
		}
		slices.Sort(v)
		return v
	}
	before, after := inputs(win), inputs(pk[i:i+w])
	// each window's median beyond the other's quartile
	q1, q3 := func(v []float64) float64 { return v[len(v)/4] }, func(v []float64) float64 { return v[3*len(v)/4] }
	mb, ma := medianF(slices.Clone(before)), medianF(slices.Clone(after))
	up := ma > q3(before) && mb < q1(after)
	if !up && !(falls && ma < q1(before) && mb > q3(after)) {
		return 0, false, false
	}
	// The batch (samples) changed at one step and stayed: that step.
	for j := i; j < min(i+w, len(pk)-SteadyMinSteps); j++ {
		if b, a := pk[j-1].Batch, pk[j].Batch; b > 0 && a > 0 && a != b && (a > b) == up && sameBatch(pk[j:j+SteadyMinSteps], a) {
			return j, up, true
		}
	}
	best, bestSep := i, -1.0
	for j := i; j <= min(i+w, len(pk)-w); j++ {
		sep := meanInput(pk[j:j+w], x) - meanInput(pk[max(start, j-w):j], x)
		if !up {
			sep = -sep
		}
		if sep > bestSep {
			best, bestSep = j, sep
		}
	}
	return best, up, true
}

// meanInput is the mean input of pk.
func meanInput(pk []session.StepPeak, x func(*session.StepPeak) int64) float64 {
	var sum float64
	for i := range pk {
		sum += float64(x(&pk[i]))
	}
	return sum / float64(len(pk))
}

// sameBatch reports whether every step of pk had batch b.
func sameBatch(pk []session.StepPeak, b int64) bool {
	for i := range pk {
		if pk[i].Batch != b {
			return false
		}
	}
	return true
}
