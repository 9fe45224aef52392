package demo

import "time"

// segment is the allocator's path through one phase (or the input gap):
// allocated goes linearly from a0 to a1, or from a0 up to a transient top
// peak at tp and down to a1; reserved climbs linearly from r0 to r1, reaching
// it at tp (the allocations that need the cache come with the top) or at the
// end, and stays. With r0 ≥ a0 and r1 ≥ max(peak, a1), reserved never falls
// below allocated.
type segment struct {
	t0, t1 time.Duration
	a0, a1 int64
	r0, r1 int64
	peak   int64 // 0: no transient
	tp     time.Duration
}

// granule is the allocator's rounding: PyTorch rounds every block to 512 B.
const granule = 512

// segment plans the current phase: it starts now, lasts dur, and ends at
// spec's values (shifted by the rank's offset). A transient top is placed on
// the sample time closest to the fraction peakAt of the phase, strictly
// inside it, so exactly one sample shows it and the peak counter never rises
// where no sample can see it.
func (g *Generator) segment(spec phaseSpec, dur time.Duration, peakAt float64) segment {
	s := segment{
		t0: g.now, t1: g.now + dur,
		a0: g.mem.Allocated, a1: spec.alloc + g.offset,
		r0: g.mem.Reserved, r1: spec.reserved + g.offset,
	}
	if peak := spec.peak + g.offset; peak > max(s.a0, s.a1) {
		s.peak = peak
		s.tp = g.sampleNear(s.t0, s.t1, s.t0+time.Duration(float64(dur)*peakAt))
	}
	return s
}

// sampleNear returns the sample time strictly inside (t0, t1) closest to
// want, or want itself when the phase is too short to hold a sample.
func (g *Generator) sampleNear(t0, t1, want time.Duration) time.Duration {
	first := g.nextSample
	for first <= t0 {
		first += samplePeriod
	}
	if first >= t1 {
		return want
	}
	best := first
	for t := first; t < t1; t += samplePeriod {
		if absDur(t-want) < absDur(best-want) {
			best = t
		}
	}
	return best
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// at returns allocated and reserved at t, t0 ≤ t < t1.
func (s segment) at(t time.Duration) (alloc, reserved int64) {
	if s.peak == 0 {
		return lerp(s.a0, s.a1, t-s.t0, s.t1-s.t0), lerp(s.r0, s.r1, t-s.t0, s.t1-s.t0)
	}
	if t <= s.tp {
		return lerp(s.a0, s.peak, t-s.t0, s.tp-s.t0), lerp(s.r0, s.r1, t-s.t0, s.tp-s.t0)
	}
	return lerp(s.peak, s.a1, t-s.tp, s.t1-s.tp), s.r1
}

// lerp is the value a fraction num/den of the way from a to b, rounded down
// (floor, both ways, so the order of two curves survives the rounding) to
// the allocator's granule; num == den gives b exactly. The products stay far
// below 2^63 for the byte differences (< 2^36) and phase durations (< 2^28 ns)
// of a phase.
func lerp(a, b int64, num, den time.Duration) int64 {
	if den <= 0 || num >= den {
		return b
	}
	if num <= 0 {
		return a
	}
	d := (b - a) * int64(num)
	q := d / int64(den)
	if d%int64(den) != 0 && d < 0 {
		q-- // floor, not truncation toward zero
	}
	return (a + q) &^ (granule - 1)
}
