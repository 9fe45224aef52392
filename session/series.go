package session

import (
	"sort"
	"time"
)

// Series is a time series of byte values that stays bounded however long a
// session runs. Points younger than the raw window are kept as they came;
// older ones are folded into fixed-width buckets that keep each bucket's
// minimum, maximum and last value, so a peak is never lost to downsampling.
type Series struct {
	raw     []point // recent points, oldest first; raw[head:] is live
	head    int
	buckets []bucket // folded history, oldest first
	width   int64    // bucket width, ns
	window  int64    // raw window, ns
	max     int64
	n       int
}

type point struct {
	t int64 // unix ns
	v int64
}

type bucket struct {
	t              int64 // start of the bucket, unix ns
	min, max, last int64
}

// Column is one slot of a downsampled view of a Series.
type Column struct {
	T              time.Time // start of the slot
	Min, Max, Last int64
	Has            bool // false where the slot holds no data
}

func newSeries(window, width time.Duration) *Series {
	return &Series{window: int64(window), width: int64(width), max: -1}
}

// Push adds a point. Points must come in time order; an older point is
// placed at the newest time seen so far.
func (s *Series) Push(at time.Time, v int64) {
	t := at.UnixNano()
	if live := s.raw[s.head:]; len(live) > 0 && t < live[len(live)-1].t {
		t = live[len(live)-1].t
	}
	s.raw = append(s.raw, point{t, v})
	s.n++
	if v > s.max {
		s.max = v
	}
	s.fold(t)
}

// fold moves raw points older than the window into buckets.
func (s *Series) fold(now int64) {
	cut := now - s.window
	for s.head < len(s.raw) && s.raw[s.head].t < cut {
		p := s.raw[s.head]
		start := p.t - p.t%s.width
		if k := len(s.buckets) - 1; k >= 0 && s.buckets[k].t == start {
			b := &s.buckets[k]
			b.min, b.max, b.last = min(b.min, p.v), max(b.max, p.v), p.v
		} else {
			s.buckets = append(s.buckets, bucket{start, p.v, p.v, p.v})
		}
		s.head++
	}
	// Compact the raw slice once its dead prefix dominates it.
	if s.head > 4096 && s.head*2 > len(s.raw) {
		s.raw = append(s.raw[:0], s.raw[s.head:]...)
		s.head = 0
	}
}

// Len is the number of points pushed so far.
func (s *Series) Len() int { return s.n }

// Max is the largest value ever pushed, -1 for an empty series.
func (s *Series) Max() int64 { return s.max }

// Last is the newest value and its time; ok is false for an empty series.
func (s *Series) Last() (at time.Time, v int64, ok bool) {
	if live := s.raw[s.head:]; len(live) > 0 {
		p := live[len(live)-1]
		return time.Unix(0, p.t), p.v, true
	}
	if k := len(s.buckets) - 1; k >= 0 {
		return time.Unix(0, s.buckets[k].t), s.buckets[k].last, true
	}
	return time.Time{}, 0, false
}

// Columns fills dst with n equal slots covering [from, to), each holding the
// minimum, maximum and last value that fell into it. It reuses dst.
func (s *Series) Columns(dst []Column, from, to time.Time, n int) []Column {
	dst = dst[:0]
	if n <= 0 || !to.After(from) {
		return dst
	}
	lo, hi := from.UnixNano(), to.UnixNano()
	step := (hi - lo) / int64(n)
	if step <= 0 {
		step = 1
	}
	for i := 0; i < n; i++ {
		dst = append(dst, Column{T: time.Unix(0, lo+int64(i)*step)})
	}
	put := func(t, mn, mx, last int64) {
		if t < lo || t >= hi {
			return
		}
		i := int((t - lo) / step)
		if i >= n {
			i = n - 1
		}
		c := &dst[i]
		if !c.Has {
			c.Min, c.Max, c.Has = mn, mx, true
		} else {
			c.Min, c.Max = min(c.Min, mn), max(c.Max, mx)
		}
		c.Last = last
	}
	// Buckets overlapping the range, then the raw points in it.
	b := sort.Search(len(s.buckets), func(i int) bool { return s.buckets[i].t+s.width > lo })
	for ; b < len(s.buckets) && s.buckets[b].t < hi; b++ {
		k := s.buckets[b]
		put(max(k.t, lo), k.min, k.max, k.last)
	}
	live := s.raw[s.head:]
	r := sort.Search(len(live), func(i int) bool { return live[i].t >= lo })
	for ; r < len(live) && live[r].t < hi; r++ {
		put(live[r].t, live[r].v, live[r].v, live[r].v)
	}
	return dst
}

// At is the value in effect at a time: the newest point at or before it.
// ok is false when the series has no point that early.
func (s *Series) At(at time.Time) (v int64, ok bool) {
	t := at.UnixNano()
	live := s.raw[s.head:]
	if i := sort.Search(len(live), func(i int) bool { return live[i].t > t }); i > 0 {
		return live[i-1].v, true
	}
	if b := sort.Search(len(s.buckets), func(i int) bool { return s.buckets[i].t > t }); b > 0 {
		return s.buckets[b-1].last, true
	}
	return 0, false
}

// MaxBetween is the largest value in [from, to]; ok is false when there is
// none. Folded history answers with its bucket maxima.
func (s *Series) MaxBetween(from, to time.Time) (v int64, ok bool) {
	lo, hi := from.UnixNano(), to.UnixNano()
	v = -1
	b := sort.Search(len(s.buckets), func(i int) bool { return s.buckets[i].t+s.width > lo })
	for ; b < len(s.buckets) && s.buckets[b].t <= hi; b++ {
		v = max(v, s.buckets[b].max)
	}
	live := s.raw[s.head:]
	r := sort.Search(len(live), func(i int) bool { return live[i].t >= lo })
	for ; r < len(live) && live[r].t <= hi; r++ {
		v = max(v, live[r].v)
	}
	return v, v >= 0
}
