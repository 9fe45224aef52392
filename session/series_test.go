package session

import (
	"testing"
	"time"
)

func TestSeriesKeepsPeaksWhenFolding(t *testing.T) {
	s := newSeries(10*time.Second, time.Second)
	t0 := time.Unix(1000, 0)
	// One hour at 50 Hz with a single one-sample spike at minute 7.
	spikeAt := 7 * 60 * 50
	for i := 0; i < 3600*50; i++ {
		v := int64(100)
		if i == spikeAt {
			v = 9000
		}
		s.Push(t0.Add(time.Duration(i)*20*time.Millisecond), v)
	}
	if got := len(s.raw) - s.head; got > 10*50+1 {
		t.Fatalf("raw window holds %d points, want at most %d", got, 10*50+1)
	}
	if len(s.buckets) > 3600 {
		t.Fatalf("%d buckets for one hour of 1 s buckets", len(s.buckets))
	}
	cols := s.Columns(nil, t0, t0.Add(time.Hour), 120)
	var peak int64
	for _, c := range cols {
		if c.Has && c.Max > peak {
			peak = c.Max
		}
	}
	if peak != 9000 || s.Max() != 9000 {
		t.Fatalf("peak after downsampling = %d (Max %d), want 9000", peak, s.Max())
	}
	if v, ok := s.MaxBetween(t0.Add(6*time.Minute), t0.Add(8*time.Minute)); !ok || v != 9000 {
		t.Fatalf("MaxBetween around the spike = %d,%v", v, ok)
	}
	if v, ok := s.MaxBetween(t0.Add(10*time.Minute), t0.Add(20*time.Minute)); !ok || v != 100 {
		t.Fatalf("MaxBetween away from the spike = %d,%v", v, ok)
	}
}

func TestSeriesColumnsRecentRaw(t *testing.T) {
	s := newSeries(time.Minute, time.Second)
	t0 := time.Unix(0, 0)
	for i, v := range []int64{1, 5, 3, 2} {
		s.Push(t0.Add(time.Duration(i)*time.Second), v)
	}
	cols := s.Columns(nil, t0, t0.Add(4*time.Second), 2)
	want := []Column{{Min: 1, Max: 5, Last: 5, Has: true}, {Min: 2, Max: 3, Last: 2, Has: true}}
	for i := range want {
		c := cols[i]
		if c.Min != want[i].Min || c.Max != want[i].Max || c.Last != want[i].Last || c.Has != want[i].Has {
			t.Errorf("column %d = %+v, want %+v", i, c, want[i])
		}
	}
	if at, v, ok := s.Last(); !ok || v != 2 || !at.Equal(t0.Add(3*time.Second)) {
		t.Errorf("Last = %v %d %v", at, v, ok)
	}
	// A point older than the newest is clamped, not reordered.
	s.Push(t0, 7)
	if _, v, _ := s.Last(); v != 7 {
		t.Errorf("late point lost: last %d", v)
	}
}

func TestSeriesEmpty(t *testing.T) {
	s := newSeries(time.Minute, time.Second)
	if _, _, ok := s.Last(); ok {
		t.Fatal("empty series has a last point")
	}
	if s.Max() != -1 {
		t.Fatalf("empty Max = %d", s.Max())
	}
	if cols := s.Columns(nil, time.Unix(0, 0), time.Unix(10, 0), 5); len(cols) != 5 || cols[0].Has {
		t.Fatalf("columns of empty series: %+v", cols)
	}
}
