package session

import (
	"testing"
	"time"
)

func TestSeriesPointsRawAndAgedBuckets(t *testing.T) {
	s := newSeries(10*time.Second, time.Second, 0)
	t0 := time.Unix(1000, 0)
	// Two minutes at 50 Hz with one spike at 30 s: past the 10 s raw window,
	// so only a bucket holds it.
	for i := 0; i < 120*50; i++ {
		v := int64(100 + i%7)
		if i == 30*50+3 {
			v = 9000
		}
		s.Push(t0.Add(time.Duration(i)*20*time.Millisecond), v)
	}
	var n, raw int
	var peak int64
	prev := time.Time{}
	s.Points(func(at time.Time, v int64) {
		if at.Before(prev) {
			t.Fatalf("point at %v before %v", at, prev)
		}
		prev = at
		n++
		if !at.Before(t0.Add(110 * time.Second)) {
			raw++
		}
		peak = max(peak, v)
	})
	if peak != 9000 {
		t.Fatalf("peak = %d, want the aged spike 9000", peak)
	}
	if raw < 10*50 || n >= 120*50 {
		t.Fatalf("%d points, %d in the raw window: want every raw point and fewer in all than pushed", n, raw)
	}
	var empty Series
	empty.Points(func(time.Time, int64) { t.Fatal("point from an empty series") })
}
