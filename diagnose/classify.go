package diagnose

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramscope/vramscope/session"
)

// The classifier's thresholds; docs/diagnosis.md explains each.
const (
	// WarmupMaxSteps is how many first steps a warmup may cover: optimizer
	// state, the allocator's first segments and kernel autotuning all
	// happen in the first two or three steps.
	WarmupMaxSteps = 3
	// WarmupLongMaxSteps bounds a warmup that lasts longer: the steps after
	// the first WarmupMaxSteps that still peak above the level's band, up
	// to a return to it (autotuning or recompiling over several steps), are
	// the warmup's when the return comes within this many steps and within
	// the run's first quarter. A high stretch that lasts longer is the run's
	// first level, not a warmup.
	WarmupLongMaxSteps = 25
	// SpreadK is how many robust standard deviations of the step-to-step
	// noise a peak may stray from the level and still be at it.
	SpreadK = 3.0
	// HeldShare is the share of the peak's growth that the memory held
	// between steps must grow by for the growth to be called a leak.
	HeldShare = 0.5
	// InputFitR2 is how well (R²) the step peaks must follow the input
	// size for growth to be put down to it.
	InputFitR2 = 0.9
)

// Growth kinds: what the memory that grows is.
const (
	// GrowthLeak: the memory held between steps grows with the peak:
	// tensors are kept across steps.
	GrowthLeak = "leak"
	// GrowthInput: the peak follows the input size the hook reported.
	GrowthInput = "input"
	// GrowthTransient: the memory held between steps stays flat, so what
	// grows lives only within a step (activations, temporaries): the input
	// grows (batch, sequence length) or the step does more work.
	GrowthTransient = "transient"
)

// classify sets the pattern from the finished step peaks and returns the
// steps that make the steady state (or the growing segment).
func (d *Diagnosis) classify(p *session.Process, pk []session.StepPeak) []session.StepPeak {
	n := len(pk)
	d.Steps = n
	if n == 0 && p.Mem == nil && len(p.StepPeaks()) > 0 {
		d.Reason = "no allocator data (a CPU run, or no CUDA memory stats)"
		return nil
	}
	if n == 0 {
		d.Reason = fmt.Sprintf("need %d finished steps to tell a pattern, have none", MinSteps)
		return nil
	}
	d.FirstStep, d.LastStep = pk[0].Index, pk[n-1].Index
	d.PeakAfter, _, _ = maxOf(pk)
	if n < MinSteps {
		d.Reason = fmt.Sprintf("need %d finished steps to tell a pattern, have %d", MinSteps, n)
		return pk
	}
	sigma := noise(pk)
	level := median(pk[n-max(SteadyMinSteps, n/2):])
	band := max(Tolerance(level), session.Bytes(math.Round(SpreadK*sigma)))
	d.Spread = session.Bytes(math.Round(sigma))
	// A leak is read from the memory held between steps first: noise
	// within steps (lengths, evaluation, autocast) does not move it.
	hp := heldAsPeaks(pk) // the held series, read by the leak rule and the level changes
	if s, from, to := heldStairs(p, pk, hp); s != nil {
		return d.stairsLeak(pk, s, from, to) // flat stairs that keep coming are a leak, not levels
	}
	// Level changes after steady stretches, when each level is flat,
	// explain a rise that the growth rules would fit a line through.
	levels := levelChanges(p, pk, hp, band, WarmupMaxSteps, false)
	stairs := levelsExplain(pk, hp, levels, band)
	if !stairs {
		g := d.heldGrowing(pk, hp)
		if g == nil {
			// Growth is tested on every step first: a leak that starts at
			// once looks like a warmup to the rule below.
			g = d.growing(p, pk, band)
		}
		if g != nil {
			if tail := d.growthAfterJump(p, pk, hp, levels, band); tail != nil {
				return tail
			}
			// The rises that settled before the growth began stay level
			// changes where each level before it is flat (a growth that
			// began earlier than its fit says is no level).
			k := 0
			for k < len(levels) && levels[k].Settled < d.GrowthFrom {
				k++
			}
			if at := indexOf(pk, d.GrowthFrom); k > 0 && levelsExplain(pk[:at], hp[:indexOf(hp, d.GrowthFrom)], levels[:k], band) {
				d.Levels = joinRamps(p, pk, levels[:k])
			}
			return g
		}
	}
	// The warmup is read against the first level, not the newest.
	d.Levels = joinRamps(p, pk, levels)
	first := level
	if len(d.Levels) > 0 {
		first = d.Levels[0].PeakFrom
	}
	// The warmup: the first steps (at most WarmupMaxSteps) that lie outside
	// the level's band, or rose into it from the step before.
	k := 0
	for i := 0; i < min(WarmupMaxSteps, n-SteadyMinSteps); i++ {
		y := pk[i].PeakAllocated
		if absDiff(y, first) > band || i > 0 && y > pk[i-1].PeakAllocated+band {
			k = i + 1
		}
	}
	if k == WarmupMaxSteps {
		k = longWarmup(pk, k, first+band, band)
	}
	body := pk[k:]
	if g := d.growing(p, body, band); !stairs && g != nil {
		return g
	}
	// A new high at the very end has not been told from growth yet; a high
	// the run reached before is noise, not new.
	for i := n - 1; i >= max(k, n-SteadyMinSteps); i-- {
		if earlier, _, _ := maxOf(pk[k:max(k, n-SteadyMinSteps)]); pk[i].PeakAllocated > level+band && i > k &&
			(n-SteadyMinSteps <= k || pk[i].PeakAllocated > earlier) {
			d.Reason = fmt.Sprintf("peak rose in step %d; need %d steps without a new high", pk[i].Index, SteadyMinSteps)
			return pk
		}
	}
	d.SteadyFrom, d.WarmupEnd = body[0].Index, body[0].Index
	d.PeakAfter, _, _ = maxOf(body)
	// Not growing: the falls to a lower level are level changes too, read
	// after the warmup with the rises, where every level they make is flat
	// (a sawtooth of lengths makes rises and falls of no level).
	if both := levelChanges(p, pk, hp, band, k, true); anyFall(both) &&
		levelsExplain(body, hp[indexOf(hp, body[0].Index):], both, band) {
		d.Levels = joinRamps(p, pk, both)
	}
	if len(d.Levels) > 0 {
		// Steady at the newest level: the need is its peak.
		d.SteadyFrom = d.Levels[len(d.Levels)-1].Settled
		body = body[indexOf(body, d.SteadyFrom):]
		d.PeakAfter, _, _ = maxOf(body)
	}
	if k == 0 {
		d.Pattern = PatternSteady
		return body
	}
	d.Pattern = PatternWarmup
	d.PeakBefore = pk[0].PeakAllocated
	d.WarmupChange = int64(d.PeakAfter - d.PeakBefore)
	prefixMax, _, _ := maxOf(pk[:k])
	at := k - 1
	settled := d.PeakAfter // the level the warmup settled at: the first one
	if len(d.Levels) > 0 {
		settled, _, _ = maxOf(pk[k:max(k+1, indexOf(pk, d.Levels[0].Step))])
	}
	if d.warmupHigh = prefixMax > settled+Tolerance(settled); d.warmupHigh {
		for i := range pk[:k] { // the first steps' high, never reached again
			if pk[i].PeakAllocated == prefixMax {
				at = i
				break
			}
		}
	}
	d.WarmupStep, d.WarmupPeak = pk[at].Index, pk[at].PeakAllocated
	d.WarmupPhase = phaseOf(p, d.WarmupStep)
	return body
}

// JumpSteps: a level change whose rise is more than this many steps of a
// growth's rate is a jump of its own, not a stretch of the growth.
const JumpSteps = 4 * LevelWindow

// growthAfterJump reads a growth found through a level change again from
// where that change settled. A rise to a new level (newly trained
// parameters, a larger batch) and a leak after it made one line to the
// growth rules, its onset before the rise and its rate the rise's share.
// The change: the first rise after the growth's onset larger than
// JumpSteps of its rate, with no growth before it. Returns the growing
// steps after it, d set from them and the level changes up to it kept;
// nil, d as it was, when there is no such change or nothing grows after it.
func (d *Diagnosis) growthAfterJump(p *session.Process, pk, hp []session.StepPeak, levels []LevelChange, band session.Bytes) []session.StepPeak {
	saved := *d
	vary := varyingInput(pk)
	for i, c := range levels {
		rise := gap(c.PeakTo, c.PeakFrom)
		if vary != nil { // the peaks' rise beyond what inputs varying step to step explain
			at, from := indexOf(pk, c.Step), indexOf(pk, c.Settled)
			rise = session.Bytes(max(0, math.Round(adjustedRise(pk[max(0, at-LevelWindow):at], pk[from:min(from+LevelWindow, len(pk))], vary))))
		}
		jump := max(rise, gap(c.HeldTo, c.HeldFrom))
		if c.Fall || c.Step <= d.GrowthFrom || float64(jump) <= JumpSteps*float64(d.GrowthPerStep) {
			continue
		}
		before, held := pk[:indexOf(pk, c.Step)], hp[:indexOf(hp, c.Step)]
		grew := d.heldGrowing(before, held) != nil || d.growing(p, before, band) != nil
		*d = saved
		if grew {
			return nil // growing before it too: the first reading stands
		}
		tail, htail := pk[indexOf(pk, c.Settled):], hp[indexOf(hp, c.Settled):]
		g := d.heldGrowing(tail, htail)
		if g == nil {
			g = d.growing(p, tail, band)
		}
		if g == nil {
			*d = saved
			return nil
		}
		d.Levels = joinRamps(p, pk, levels[:i+1])
		return g
	}
	return nil
}

// longWarmup is where a warmup that covered the first k steps ends: the
// first step after them at the level, when the steps between all peaked
// above it and it comes within WarmupLongMaxSteps and the run's first
// quarter; k otherwise. The level is the run's (top: its band's top), or,
// where the run's level falls later (layers frozen at step 150), the one
// that follows the warmup: the median of up to LevelWindow steps from
// there, which the steps between must pass its highest step by band.
func longWarmup(pk []session.StepPeak, k int, top, band session.Bytes) int {
	limit := min(WarmupLongMaxSteps, len(pk)/4)
	for j := k; j < limit; j++ {
		if pk[j].PeakAllocated <= top {
			return j
		}
	}
	for j := k; j < limit; j++ {
		win := pk[j:min(j+LevelWindow, len(pk))]
		if pk[j].PeakAllocated > median(win)+band {
			continue
		}
		high, _, _ := maxOf(win)
		for _, sp := range pk[k:j] {
			if sp.PeakAllocated <= high+band {
				return k
			}
		}
		return j
	}
	return k
}

// growing applies the growth rule: it finds where the growth starts (the
// change point of a flat-then-rising fit), fits the rate over the growing
// segment only, and calls it growth when that segment rises significantly
// (t ≥ GrowthMinT) and by more than the run's spread, and its recent half
// still sets new highs (a warmup's does not). It returns the growing segment, nil when there is
// no growth.
func (d *Diagnosis) growing(p *session.Process, body []session.StepPeak, band session.Bytes) []session.StepPeak {
	if len(body) < GrowthMinSteps {
		return nil
	}
	c := changePoint(body)
	seg := body[c:]
	recent := seg[len(seg)-max(GrowthMinSteps, len(seg)/2):]
	earlier := seg[:len(seg)-len(recent)]
	b, t := fit(seg, false)
	span := float64(seg[len(seg)-1].Index - seg[0].Index)
	top, _, _ := maxOf(recent)
	before, _, _ := maxOf(earlier)
	if len(earlier) == 0 {
		before = seg[0].PeakAllocated
	}
	// Growth has not levelled off: the recent half sets a new high beyond
	// the band over everything before it (a warmup's recent half does not).
	if b < float64(MinGrowthPerStep) || t < GrowthMinT || b*span <= float64(band) || top <= before+band {
		return nil
	}
	// Inputs that vary step to step (a sawtooth of lengths) make rising
	// stretches of their own: within the inputs seen before, the recent
	// peaks must rise beyond what the input explains.
	if x := varyingInput(body); x != nil && c > 0 && inputsWithin(seg, body[:c], x) &&
		adjustedRise(body[max(0, c-LevelWindow):c], recent, x) <= float64(band) {
		return nil
	}
	d.Pattern = PatternGrowth
	d.GrowthPerStep = session.Bytes(math.Round(b))
	d.GrowthFrom, d.GrowthTo = seg[0].Index, seg[len(seg)-1].Index
	d.PeakAfter, _, _ = maxOf(seg)
	d.growthKind(p, seg, b)
	return seg
}

// growthKind tells what grows: the memory held between steps (a leak),
// the input (when the hook reports its size), or memory that lives only
// within a step.
func (d *Diagnosis) growthKind(p *session.Process, seg []session.StepPeak, slope float64) {
	held := seg[:0:0]
	for _, sp := range seg {
		if sp.Held.Known() {
			held = append(held, sp)
		}
	}
	d.HeldFrom, d.HeldTo, d.HeldPerStep = session.Unknown, session.Unknown, session.Unknown
	if len(held) >= GrowthMinSteps {
		bh, _ := fit(held, true)
		d.HeldPerStep = session.Bytes(math.Round(bh))
		d.HeldFrom, d.HeldTo = held[0].Held, held[len(held)-1].Held
	}
	if per, unit, ok := inputFit(seg); ok {
		d.GrowthKind, d.PerInput, d.InputUnit = GrowthInput, per, unit
		return
	}
	switch {
	case d.HeldPerStep.Known() && float64(d.HeldPerStep) >= HeldShare*slope:
		d.GrowthKind = GrowthLeak
	case d.HeldPerStep.Known():
		d.GrowthKind = GrowthTransient
	default:
		d.GrowthKind = GrowthLeak // nothing says otherwise: keep the warning
	}
}

// inputFit regresses the step peaks on the input size (tokens when every
// step has them, else the batch): the bytes per sample or token, when the
// input varied and the peaks follow it (R² ≥ InputFitR2).
func inputFit(seg []session.StepPeak) (per session.Bytes, unit string, ok bool) {
	for _, u := range []struct {
		name string
		of   func(*session.StepPeak) int64
	}{{"token", func(s *session.StepPeak) int64 { return s.Tokens }}, {"sample", func(s *session.StepPeak) int64 { return s.Batch }}} {
		var xs, ys []float64
		for i := range seg {
			if v := u.of(&seg[i]); v > 0 {
				xs, ys = append(xs, float64(v)), append(ys, float64(seg[i].PeakAllocated))
			}
		}
		if len(xs) < GrowthMinSteps || len(xs) < len(seg)*3/4 || slices.Min(xs) == slices.Max(xs) {
			continue
		}
		slope, r2 := regress(xs, ys)
		if slope > 0 && r2 >= InputFitR2 {
			return session.Bytes(math.Round(slope)), u.name, true
		}
	}
	return 0, "", false
}

// regress is the least-squares slope of ys on xs and its R².
func regress(xs, ys []float64) (slope, r2 float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx, sxy, syy = sxx+dx*dx, sxy+dx*dy, syy+dy*dy
	}
	if sxx == 0 || syy == 0 {
		return 0, 0
	}
	return sxy / sxx, sxy * sxy / (sxx * syy)
}

// changePoint returns the index in pk where a flat-then-rising fit (a
// hinge: level until the change point, a line after it) leaves the least
// squared error; 0 when a plain line fits best. O(n) with suffix sums.
func changePoint(pk []session.StepPeak) int {
	n := len(pk)
	x0 := float64(pk[0].Index)
	var my float64
	for i := range pk {
		my += float64(pk[i].PeakAllocated)
	}
	my /= float64(n)
	var yy float64
	for i := range pk {
		y := float64(pk[i].PeakAllocated) - my
		yy += y * y
	}
	// Suffix sums of x, x², x·y and y (y centred, x from the first step, so
	// the squares stay small enough for float64), built from the end.
	var sx, sxx, sxy, sy float64
	best, bestSSE := 0, math.Inf(1)
	N := float64(n)
	for j := n - 1; j >= 0; j-- {
		x, y := float64(pk[j].Index)-x0, float64(pk[j].PeakAllocated)-my
		sx, sxx, sxy, sy = sx+x, sxx+x*x, sxy+x*y, sy+y
		if j > n-GrowthMinSteps {
			continue
		}
		xc, cnt := x, float64(n-j)
		h := sx - cnt*xc
		hh := sxx - 2*xc*sx + cnt*xc*xc
		hy := sxy - xc*sy // Σy over all is 0: y is centred
		vxx := hh - h*h/N
		if vxx <= 0 || hy <= 0 {
			continue
		}
		// Going backwards, an equal fit keeps the earlier change point.
		if sse := yy - hy*hy/vxx; sse <= bestSSE*(1+1e-9) {
			best, bestSSE = j, sse
		}
	}
	return best
}

// noise is a robust standard deviation of the step-to-step noise of the
// peaks: the median absolute deviation of successive differences (which a
// steady trend or a few jumps do not move), scaled to a standard deviation
// of one peak (× 1.4826 / √2).
func noise(pk []session.StepPeak) float64 {
	pk = pk[len(pk)-min(len(pk), NoiseWindow):]
	if len(pk) < 3 {
		return 0
	}
	d := make([]float64, len(pk)-1)
	for i := range d {
		d[i] = float64(pk[i+1].PeakAllocated - pk[i].PeakAllocated)
	}
	m := medianF(d)
	for i := range d {
		d[i] = math.Abs(d[i] - m)
	}
	return 1.4826 * medianF(d) / math.Sqrt2
}

// NoiseWindow is how many recent steps the spread and the level are read
// from: enough for a robust figure, and a bounded cost per frame.
const NoiseWindow = 512

// median is the median allocated peak of pk (its last NoiseWindow steps).
func median(pk []session.StepPeak) session.Bytes {
	pk = pk[len(pk)-min(len(pk), NoiseWindow):]
	v := make([]float64, len(pk))
	for i := range pk {
		v[i] = float64(pk[i].PeakAllocated)
	}
	return session.Bytes(math.Round(medianF(v)))
}

// medianF sorts v and returns its median.
func medianF(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func absDiff(a, b session.Bytes) session.Bytes {
	if a > b {
		return a - b
	}
	return b - a
}
