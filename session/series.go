package session

import (
	"sort"
	"time"
	"unsafe"
)

// Series is a time series of byte values that stays bounded however long a
// session runs. Every point goes into fixed-width buckets that keep their
// minimum, maximum and last value, so a peak is never lost to downsampling;
// the points of the recent raw window are also kept as they came, for close
// zoom and for exact answers about recent times. Buckets age into coarser
// levels (levelSpec): a store that reads a whole recording keeps 100 ms
// buckets for the last ten minutes, 1 s for two hours, then 10 s for a day,
// then 1 min (wholeLevels); a live view's store keeps fewer, at the
// resolution its chart draws (liveLevels).
//
// The raw window is bounded by time and by count (DefaultMaxRawPoints, or
// the live view's liveRawPoints), as journald and Prometheus bound theirs
// by size: at a thousand points a second, ten minutes of raw points were
// 600,000 per series and a million fast steps took the monitor past 1.3 GB.
type Series struct {
	raw    []point // recent points, oldest first; raw[head:] is live
	head   int
	levels []level // finest first; each holds older data than the one before
	window int64   // raw window, ns
	maxRaw int     // raw points kept at most
	first  int64   // time of the first point
	max    int64
	n      int
}

type point struct {
	t int64 // unix ns
	v int64
}

type bucket struct {
	t              int64 // start of the bucket, unix ns
	min, max, last int64
}

// level is a run of buckets of one width. cap bounds it: the oldest
// buckets past it move into the next, coarser level (the last level is
// unbounded, and grows by one bucket a minute).
type level struct {
	width int64
	cap   int
	b     []bucket
	head  int // b[head:] is live
}

// Column is one slot of a downsampled view of a Series.
type Column struct {
	T              time.Time // start of the slot
	Min, Max, Last int64
	Has            bool // false where the slot holds no data
}

// DefaultMaxRawPoints bounds the raw points a Series keeps (16 bytes each):
// 32,768 hold the whole ten-minute window at the hook's usual rates (a step
// a second or slower) and the last few seconds of a hook that sends a
// thousand edges a second; the 100 ms buckets cover what is older.
const DefaultMaxRawPoints = 1 << 15

// levelSpec is one level of buckets: its width is num/den of the store's
// bucket width (WithBucket), and it holds cap buckets before the oldest
// age into the next level (0: unbounded, the last level).
type levelSpec struct {
	num, den int64
	cap      int
}

// wholeLevels are the buckets of a store that reads a whole recording
// (report, diff, export): 100 ms for ten minutes, 1 s for two hours, 10 s
// for a day, then 1 min; about 700 KB per series at a day.
var wholeLevels = []levelSpec{{1, 10, 6000}, {1, 1, 7200}, {10, 1, 8640}, {60, 1, 0}}

// liveLevels are the buckets of a live view's store (WithLiveBounds). Each
// level holds at least as many buckets as a 200-column chart has columns at
// the zooms it serves (tui's zoom levels: 5 s to 24 h), so every column of
// the chart still has its own bucket: 10 ms for the last 10 seconds, 100 ms
// for two minutes, 1 s for half an hour, 10 s for two hours, then 1 min;
// about 170 KB per series at an hour.
var liveLevels = []levelSpec{{1, 100, 1000}, {1, 10, 1200}, {1, 1, 1800}, {10, 1, 720}, {60, 1, 0}}

// newSeries returns a series with the buckets of a whole recording.
func newSeries(window, width time.Duration, maxRaw int) *Series {
	return newSeriesOf(window, width, maxRaw, wholeLevels)
}

func newSeriesOf(window, width time.Duration, maxRaw int, specs []levelSpec) *Series {
	w := int64(width)
	if maxRaw <= 0 {
		maxRaw = DefaultMaxRawPoints
	}
	levels := make([]level, len(specs))
	for i, sp := range specs {
		levels[i] = level{width: max(w*sp.num/sp.den, 1), cap: sp.cap}
	}
	return &Series{window: int64(window), maxRaw: maxRaw, max: -1, levels: levels}
}

// Push adds a point. Points must come in time order; an older point is
// placed at the newest time seen so far.
func (s *Series) Push(at time.Time, v int64) {
	t := at.UnixNano()
	if live := s.raw[s.head:]; len(live) > 0 && t < live[len(live)-1].t {
		t = live[len(live)-1].t
	}
	if s.n == 0 {
		s.first = t
	}
	if len(s.raw) == cap(s.raw) && s.head > 0 && (s.head*8 >= len(s.raw) || len(s.raw) >= s.rawRoom()) {
		// Out of room with an eighth of it dropped, or at its bound: reuse
		// it rather than grow, so the buffer stays within a few eighths of
		// what it holds.
		n := copy(s.raw, s.raw[s.head:])
		s.raw, s.head = s.raw[:n], 0
	}
	s.raw = append(roomFor(s.raw, s.rawRoom()), point{t, v})
	s.n++
	if v > s.max {
		s.max = v
	}
	s.levels[0].add(bucket{t - t%s.levels[0].width, v, v, v})
	s.age(0)
	// Drop raw points older than the window, and the oldest past the count.
	cut := t - s.window
	for s.head < len(s.raw) && s.raw[s.head].t < cut {
		s.head++
	}
	if over := len(s.raw) - s.head - s.maxRaw; over > 0 {
		s.head += over
	}
}

// rawRoom bounds the raw buffer: the points kept and an eighth more, so
// that a full buffer moves its points down once every maxRaw/8 pushes.
// append's own growth left 45,000 points of room for 32,768 (a 64-rank
// report held 140 MB of them).
func (s *Series) rawRoom() int { return s.maxRaw + s.maxRaw/8 }

// add merges b into the level's newest bucket when it starts there.
func (l *level) add(b bucket) {
	if k := len(l.b) - 1; k >= l.head && l.b[k].t == b.t {
		last := &l.b[k]
		last.min, last.max, last.last = min(last.min, b.min), max(last.max, b.max), b.last
		return
	}
	if len(l.b) == cap(l.b) && l.head*8 >= len(l.b) {
		// Out of room with an eighth of it aged out: reuse it (as Push
		// does its raw points).
		n := copy(l.b, l.b[l.head:])
		l.b, l.head = l.b[:n], 0
	}
	l.b = append(l.b, b)
}

// age moves the oldest buckets of level i past its cap into level i+1.
func (s *Series) age(i int) {
	l := &s.levels[i]
	if l.cap == 0 || len(l.b)-l.head <= l.cap {
		return
	}
	next := &s.levels[i+1]
	for len(l.b)-l.head > l.cap {
		b := l.b[l.head]
		b.t -= b.t % next.width
		next.add(b)
		l.head++
	}
	s.age(i + 1)
}

// Len is the number of points pushed so far.
func (s *Series) Len() int { return s.n }

// heldBytes is the memory s holds: its raw points' and buckets' buffers.
func (s *Series) heldBytes() int {
	n := cap(s.raw) * int(unsafe.Sizeof(point{}))
	for i := range s.levels {
		n += cap(s.levels[i].b) * int(unsafe.Sizeof(bucket{}))
	}
	return n
}

// Max is the largest value ever pushed, -1 for an empty series.
func (s *Series) Max() int64 { return s.max }

// Last is the newest value and its time; ok is false for an empty series.
func (s *Series) Last() (at time.Time, v int64, ok bool) {
	if live := s.raw[s.head:]; len(live) > 0 {
		p := live[len(live)-1]
		return time.Unix(0, p.t), p.v, true
	}
	return time.Time{}, 0, false
}

// First is the oldest value still held and its time (the raw window's
// first point, or the oldest bucket's last value); ok is false when empty.
func (s *Series) First() (at time.Time, v int64, ok bool) {
	if live := s.raw[s.head:]; len(live) > 0 && live[0].t == s.first {
		return time.Unix(0, live[0].t), live[0].v, true
	}
	for i := len(s.levels) - 1; i >= 0; i-- {
		if l := &s.levels[i]; len(l.b) > l.head {
			return time.Unix(0, max(l.b[l.head].t, s.first)), l.b[l.head].last, true
		}
	}
	return time.Time{}, 0, false
}

// rawFrom is the time from which the raw points cover the series: before
// it, only buckets hold data.
func (s *Series) rawFrom() int64 {
	if live := s.raw[s.head:]; len(live) > 0 {
		return live[0].t
	}
	return 1<<63 - 1
}

// Columns fills dst with n equal slots covering [from, to), each holding the
// minimum, maximum and last value that fell into it. It reuses dst. Slots
// at least a bucket wide are filled from the buckets alone, so a zoomed-out
// view costs the number of buckets in range, not of points.
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
	// Buckets cover everything; raw points are finer where they exist.
	rawFrom := s.rawFrom()
	if step >= s.levels[0].width {
		rawFrom = hi
	}
	for i := len(s.levels) - 1; i >= 0; i-- {
		l := &s.levels[i]
		live := l.b[l.head:]
		b := sort.Search(len(live), func(k int) bool { return live[k].t+l.width > lo })
		for ; b < len(live) && live[b].t < hi; b++ {
			k := &live[b]
			if i == 0 && k.t+l.width > rawFrom {
				break // the raw points take over here
			}
			putColumn(dst, max(k.t, lo), lo, hi, step, k.min, k.max, k.last)
		}
	}
	if rawFrom < hi {
		live := s.raw[s.head:]
		r := sort.Search(len(live), func(k int) bool { return live[k].t >= max(lo, rawFrom) })
		for ; r < len(live) && live[r].t < hi; r++ {
			putColumn(dst, live[r].t, lo, hi, step, live[r].v, live[r].v, live[r].v)
		}
	}
	return dst
}

func putColumn(dst []Column, t, lo, hi, step, mn, mx, last int64) {
	if t < lo || t >= hi {
		return
	}
	i := int((t - lo) / step)
	if i >= len(dst) {
		i = len(dst) - 1
	}
	c := &dst[i]
	if !c.Has {
		c.Min, c.Max, c.Has = mn, mx, true
	} else {
		c.Min, c.Max = min(c.Min, mn), max(c.Max, mx)
	}
	c.Last = last
}

// At is the value in effect at a time: the newest point at or before it.
// ok is false when the series has no point that early.
func (s *Series) At(at time.Time) (v int64, ok bool) {
	t := at.UnixNano()
	if s.n == 0 || t < s.first {
		return 0, false
	}
	live := s.raw[s.head:]
	if len(live) > 0 && t >= live[0].t {
		i := sort.Search(len(live), func(i int) bool { return live[i].t > t })
		return live[i-1].v, true
	}
	for i := range s.levels {
		l := &s.levels[i]
		b := l.b[l.head:]
		if len(b) == 0 || b[0].t > t {
			continue
		}
		k := sort.Search(len(b), func(k int) bool { return b[k].t > t })
		return b[k-1].last, true
	}
	return 0, false
}

// MaxBetween is the largest value in [from, to]; ok is false when there is
// none. Where only buckets remain it answers with their maxima.
func (s *Series) MaxBetween(from, to time.Time) (v int64, ok bool) {
	lo, hi := from.UnixNano(), to.UnixNano()
	v = -1
	rawFrom := s.rawFrom()
	if lo < rawFrom {
		for i := range s.levels {
			l := &s.levels[i]
			live := l.b[l.head:]
			b := sort.Search(len(live), func(k int) bool { return live[k].t+l.width > lo })
			for ; b < len(live) && live[b].t <= hi; b++ {
				v = max(v, live[b].max)
			}
		}
	}
	live := s.raw[s.head:]
	r := sort.Search(len(live), func(i int) bool { return live[i].t >= lo })
	for ; r < len(live) && live[r].t <= hi; r++ {
		v = max(v, live[r].v)
	}
	return v, v >= 0
}
