package diagnose

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// Held memory: what is allocated between steps (at each step's closing
// read). A leak is held memory that rises; it is read from this series
// first, because it is not moved by what varies within a step (sequence
// lengths, evaluation spikes, autocast), which the peaks are.

// HeldSummary is the memory held between steps over the steps looked at.
type HeldSummary struct {
	// FirstStep and LastStep are the steps of First and Last (-1 none);
	// Min and Max its range over those steps.
	FirstStep int           `json:"first_step"`
	LastStep  int           `json:"last_step"`
	First     session.Bytes `json:"first"`
	Last      session.Bytes `json:"last"`
	Min       session.Bytes `json:"min"`
	Max       session.Bytes `json:"max"`
	// Typical is the held memory of most steps (their median) when it is
	// not flat but all steps except a few (at most OddShare of them, Odd)
	// lie within tolerance of it: a step that a validation's zero_grad
	// ends, a checkpoint's step. Unknown, and Odd empty, otherwise.
	Typical session.Bytes `json:"typical"`
	Odd     []int         `json:"odd_steps"`
	// OddMin and OddMax are the odd steps' range (Unknown without them).
	OddMin session.Bytes `json:"odd_min"`
	OddMax session.Bytes `json:"odd_max"`
}

// OddShare is the largest share of the steps whose held memory may stray
// from the rest's for the summary to give the rest's as typical.
const OddShare = 0.2

// oddNamed is how many odd steps the line names.
const oddNamed = 5

// heldOf summarizes the held memory of pk.
func heldOf(pk []session.StepPeak) HeldSummary {
	h := HeldSummary{FirstStep: -1, LastStep: -1, First: session.Unknown, Last: session.Unknown, Min: session.Unknown,
		Max: session.Unknown, Typical: session.Unknown, Odd: []int{}, OddMin: session.Unknown, OddMax: session.Unknown}
	known := make([]session.StepPeak, 0, len(pk))
	for i := range pk {
		v := pk[i].Held
		if !v.Known() {
			continue
		}
		known = append(known, pk[i])
		if h.FirstStep < 0 {
			h.FirstStep, h.First, h.Min = pk[i].Index, v, v
		}
		h.LastStep, h.Last = pk[i].Index, v
		h.Min, h.Max = min(h.Min, v), max(h.Max, v)
	}
	if len(known) < MinSteps || h.Max-h.Min <= Tolerance(h.Max) {
		return h
	}
	typical := medianHeld(known)
	var odd []int
	lo, hi := session.Unknown, session.Unknown
	for i := range known {
		if v := known[i].Held; absDiff(v, typical) > Tolerance(typical) {
			odd = append(odd, known[i].Index)
			if !lo.Known() || v < lo {
				lo = v
			}
			hi = hi.Max(v)
		}
	}
	if float64(len(odd)) <= OddShare*float64(len(known)) {
		h.Typical, h.Odd, h.OddMin, h.OddMax = typical, odd, lo, hi
	}
	return h
}

// Line is "held between steps: 1650 MiB (steps 1–5)" when flat within
// tolerance; "held between steps: 642 MiB (steps 0–59), but 498 MiB on 3
// of them (steps 19, 39, 59)" when all but a few steps are; "held between steps:
// 1541→10214 MiB (steps 0–99; lowest …, highest … MiB)" otherwise.
func (h HeldSummary) Line() string {
	if h.FirstStep < 0 {
		return ""
	}
	if h.Max-h.Min <= Tolerance(h.Max) {
		return fmt.Sprintf("held between steps: %s MiB (steps %d–%d)", h.Last.MiBString(), h.FirstStep, h.LastStep)
	}
	if h.Typical.Known() {
		named := make([]string, 0, oddNamed+1)
		for i, st := range h.Odd {
			if i == oddNamed {
				named = append(named, "…")
				break
			}
			named = append(named, strconv.Itoa(st))
		}
		odd := h.OddMin.MiBString()
		if h.OddMax-h.OddMin > Tolerance(h.OddMax) {
			odd += "–" + h.OddMax.MiBString()
		}
		where := fmt.Sprintf("on %d of them (steps %s)", len(h.Odd), strings.Join(named, ", "))
		if len(h.Odd) == 1 {
			where = fmt.Sprintf("on step %d", h.Odd[0])
		}
		return fmt.Sprintf("held between steps: %s MiB (steps %d–%d), but %s MiB %s",
			h.Typical.MiBString(), h.FirstStep, h.LastStep, odd, where)
	}
	return fmt.Sprintf("held between steps: %s→%s MiB (steps %d–%d; lowest %s, highest %s MiB)",
		h.First.MiBString(), h.Last.MiBString(), h.FirstStep, h.LastStep, h.Min.MiBString(), h.Max.MiBString())
}

// heldAsPeaks copies the steps that have held memory, with the held figure
// in PeakAllocated, so the peak's fits apply to it.
func heldAsPeaks(pk []session.StepPeak) []session.StepPeak {
	out := make([]session.StepPeak, 0, len(pk))
	for _, sp := range pk {
		if sp.Held.Known() {
			sp.PeakAllocated = sp.Held
			out = append(out, sp)
		}
	}
	return out
}

// warmupJumps is how many first steps of hp (at most WarmupMaxSteps) end
// before a jump in held memory: a step-to-step change that strays more
// than band from the series' median change (state or a buffer made in the
// first steps). The growth's change point is looked for after them: such
// a jump is the warmup's, and a hinge fit through it takes a leak that
// starts later for one from the first step (onset 0 where it began at
// step 60, with state made at step 1).
func warmupJumps(hp []session.StepPeak, band session.Bytes) int {
	n := len(hp)
	if n < MinSteps+1 {
		return 0
	}
	w := hp[n-min(n, NoiseWindow):]
	d := make([]float64, len(w)-1)
	for i := range d {
		d[i] = float64(w[i+1].PeakAllocated - w[i].PeakAllocated)
	}
	typical := medianF(d)
	k := 0
	for i := 0; i < min(WarmupMaxSteps, n-MinSteps); i++ {
		if math.Abs(float64(hp[i+1].PeakAllocated-hp[i].PeakAllocated)-typical) > float64(band) {
			k = i + 1
		}
	}
	return k
}

// heldGrowing is the leak rule: the held memory's change point (a
// flat-then-rising fit), a slope of at least MinGrowthPerStep with t ≥
// GrowthMinT, a rise beyond the held memory's own band, a recent half that
// still sets new highs, and a peak that rises with it (held growth at
// least HeldShare of the peak's over the same steps; otherwise what grows
// is the input, read by the peak rule). hp is heldAsPeaks(pk). It returns
// the growing segment of pk, nil when held memory does not grow.
func (d *Diagnosis) heldGrowing(pk, hp []session.StepPeak) []session.StepPeak {
	if len(hp) < MinSteps || len(hp) < len(pk)*3/4 {
		return nil
	}
	n := len(hp)
	level := median(hp[n-max(SteadyMinSteps, n/2):])
	band := max(Tolerance(level), session.Bytes(math.Round(SpreadK*noise(hp))))
	hp = hp[warmupJumps(hp, band):]
	c := changePoint(hp)
	seg := hp[c:]
	recent := seg[len(seg)-max(GrowthMinSteps, len(seg)/2):]
	earlier := seg[:len(seg)-len(recent)]
	b, t := fit(seg, false)
	span := float64(seg[len(seg)-1].Index - seg[0].Index)
	top, _, _ := maxOf(recent)
	before := seg[0].PeakAllocated
	if len(earlier) > 0 {
		before, _, _ = maxOf(earlier)
	}
	if b < float64(MinGrowthPerStep) || t < GrowthMinT || b*span <= float64(band) || top <= before+band {
		return nil
	}
	from := seg[0].Index
	var body []session.StepPeak
	for i := range pk {
		if pk[i].Index >= from {
			body = pk[i:]
			break
		}
	}
	pb, _ := fit(body, false)
	if len(body) < GrowthMinSteps || b < HeldShare*pb {
		return nil
	}
	// The hinge's corner is the last step at the old level: the leak shows
	// from the step after it.
	onset := from
	if c > 0 && len(seg) > 1 {
		onset = seg[1].Index
	}
	d.Pattern, d.GrowthKind = PatternGrowth, GrowthLeak
	d.GrowthPerStep = session.Bytes(math.Round(pb))
	d.GrowthFrom, d.GrowthTo = onset, seg[len(seg)-1].Index
	d.HeldPerStep = session.Bytes(math.Round(b))
	d.HeldFrom, d.HeldTo = seg[0].PeakAllocated, seg[len(seg)-1].PeakAllocated
	d.PeakAfter, _, _ = maxOf(body)
	return body
}
