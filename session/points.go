package session

import "time"

// Points calls each for the series' points from the oldest on, in time
// order, for exporters that need the curve rather than a chart's columns.
// Where the raw points have aged out (past the raw window, see
// WithRawWindow), each remaining bucket stands for its points as one point
// at the bucket's start carrying the bucket's maximum, so a peak is never
// lost; from the first raw point on, every raw point is given as it came.
func (s *Series) Points(each func(at time.Time, v int64)) {
	rawFrom := s.rawFrom()
	if s.n == 0 || s.first >= rawFrom {
		rawFrom = -1 << 63 // nothing has aged out: the raw points are all
	}
	var last int64 = -1 << 63 // the newest time given so far
	for i := len(s.levels) - 1; i >= 0; i-- {
		l := &s.levels[i]
		for _, b := range l.b[l.head:] {
			// A coarser level's bucket may start after a finer one's
			// (they age in whole buckets): keep the output in time order.
			if b.t < last || b.t >= rawFrom {
				continue
			}
			at := max(b.t, s.first) // a bucket starts on a boundary, its data not before the first point
			each(time.Unix(0, at), b.max)
			last = at
		}
	}
	for _, p := range s.raw[s.head:] {
		each(time.Unix(0, p.t), p.v)
	}
}
