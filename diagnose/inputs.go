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

// InputDriftShare is how far, as a share of a change of the input's own
// level, the input may drift along a line over the stretch before or
// after it (inputLevelsFlat): drawn lengths drift slowly (measured: 0.58 of
// a batch 6→8 change over 150 steps of the truth corpus's drawn lengths).
const InputDriftShare = 0.75

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

// inputLevelAt finds a change of the input's own level at step i of pk,
// after start. A batch (samples) that changes at i and stays, from a
// batch that held before it, is one, at i (a batch-size schedule). Else
// the mean inputs of the InputShiftWindow steps before i and those from
// it must differ by InputShiftZ standard errors (Welch's), each window's
// median beyond the other's quartile; the change is then placed at the
// least-squares split of the inputs from a window before i to two after
// it (the step that leaves the least squared error about the two sides'
// means). Returns the step, whether it rose, and whether there is one.
// (Falls only with falls.)
func inputLevelAt(pk []session.StepPeak, i, start int, x func(*session.StepPeak) int64, falls bool) (int, bool, bool) {
	if i-start >= SteadyMinSteps && len(pk)-i >= SteadyMinSteps {
		if b, a := pk[i-1].Batch, pk[i].Batch; b > 0 && a > 0 && a != b && (a > b || falls) &&
			sameBatch(pk[i-SteadyMinSteps:i], b) && sameBatch(pk[i:i+SteadyMinSteps], a) {
			return i, a > b, true
		}
	}
	const w = InputShiftWindow
	if i-start < w || len(pk)-i < w || !sameBatch(pk[i-w:i+w], pk[i].Batch) {
		return 0, false, false
	}
	// (the test every step takes, without allocating)
	mb, vb := meanVar(pk[i-w:i], x)
	ma, va := meanVar(pk[i:i+w], x)
	if se := math.Sqrt((vb + va) / w); se == 0 || math.Abs(ma-mb) < InputShiftZ*se {
		return 0, false, false
	}
	inputs := func(pk []session.StepPeak) []float64 {
		v := make([]float64, len(pk))
		for k := range pk {
			v[k] = float64(x(&pk[k]))
		}
		return v
	}
	before, after := inputs(pk[i-w:i]), inputs(pk[i:i+w])
	slices.Sort(before)
	slices.Sort(after)
	q1, q3 := func(v []float64) float64 { return v[len(v)/4] }, func(v []float64) float64 { return v[3*len(v)/4] }
	mdb, mda := medianF(before), medianF(after)
	up := mda > q3(before) && mdb < q1(after)
	if !up && !(falls && mda < q1(before) && mdb > q3(after)) {
		return 0, false, false
	}
	// the least-squares split of the span, no nearer its ends than LevelMinSteps
	span := inputs(pk[i-w : min(len(pk), i+2*w)])
	var total, sq float64
	for _, v := range span {
		total += v
		sq += v * v
	}
	best, bestSSE, left := i, math.Inf(1), 0.0
	for k := 1; k < len(span); k++ {
		left += span[k-1]
		if k < LevelMinSteps || len(span)-k < LevelMinSteps {
			continue
		}
		n1, n2 := float64(k), float64(len(span)-k)
		right := total - left
		if sse := sq - left*left/n1 - right*right/n2; sse < bestSSE {
			best, bestSSE = i-w+k, sse
		}
	}
	return best, up, true
}

// InputShiftWindow is how many steps on each side of a step the input's
// own level is compared over; InputShiftZ how many standard errors its
// means must differ by (a run tests each of its steps: a 1,500-step run
// of lengths drawn per step must pass none by chance).
const (
	InputShiftWindow = 2 * LevelWindow
	InputShiftZ      = 5.0
)

// meanVar is the mean and the sample variance of the inputs of pk.
func meanVar(pk []session.StepPeak, x func(*session.StepPeak) int64) (mean, variance float64) {
	for i := range pk {
		mean += float64(x(&pk[i]))
	}
	mean /= float64(len(pk))
	for i := range pk {
		d := float64(x(&pk[i])) - mean
		variance += d * d
	}
	return mean, variance / float64(len(pk)-1)
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

// inputLevelsFlat returns out without the changes of the input's own level
// (byInput) whose levels are no levels: the input before the change (from
// the last change's settling, or first) or after it (to the next change)
// moves along a line over that stretch by more than InputDriftShare of
// the change between their means. A curriculum of lengths that grow step
// by step under per-step jitter passes the windows' quartile test again
// and again; its stretches ramp.
func inputLevelsFlat(pk []session.StepPeak, first int, out []LevelChange, byInput []bool, x func(*session.StepPeak) int64) []LevelChange {
	keep := out[:0:0]
	for k, c := range out {
		if !byInput[k] {
			keep = append(keep, c)
			continue
		}
		from := first
		if k > 0 {
			from = indexOf(pk, out[k-1].Settled)
		}
		to := len(pk)
		if k+1 < len(out) {
			to = indexOf(pk, out[k+1].Step)
		}
		at, settled := indexOf(pk, c.Step), indexOf(pk, c.Settled)
		before, after := pk[from:at], pk[settled:to]
		if len(before) < 2 || len(after) < 2 {
			continue
		}
		ma, _ := meanVar(after, x)
		mb, _ := meanVar(before, x)
		shift := math.Abs(ma - mb)
		if inputDrift(before, x) <= InputDriftShare*shift && inputDrift(after, x) <= InputDriftShare*shift {
			keep = append(keep, c)
		}
	}
	return keep
}

// inputDrift is how far a least-squares line of input on step moves over
// pk, in input units; 0 where its slope is not significant (t below
// GrowthMinT: lengths drawn per step tilt a line by chance).
func inputDrift(pk []session.StepPeak, x func(*session.StepPeak) int64) float64 {
	xs, ys := make([]float64, len(pk)), make([]float64, len(pk))
	for i := range pk {
		xs[i], ys[i] = float64(pk[i].Index), float64(x(&pk[i]))
	}
	slope, r2 := regress(xs, ys)
	if n := float64(len(pk)); n < 3 || r2 < 1 && math.Sqrt(r2*(n-2)/(1-r2)) < GrowthMinT {
		return 0
	}
	return math.Abs(slope) * (xs[len(xs)-1] - xs[0])
}
