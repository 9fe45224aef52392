package session

import (
	"testing"
	"time"
)

func TestSeriesKeepsPeaksWhenFolding(t *testing.T) {
	s := newSeries(10*time.Second, time.Second, 0)
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
	if n := len(s.levels[1].b) - s.levels[1].head; n > 3601 {
		t.Fatalf("%d buckets for one hour of 1 s buckets", n)
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
	s := newSeries(time.Minute, time.Second, 0)
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
	s := newSeries(time.Minute, time.Second, 0)
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

func TestSeriesAgesIntoCoarserLevelsKeepingPeaks(t *testing.T) {
	s := newSeries(time.Minute, time.Second, 0)
	t0 := time.Unix(1_000_000, 0)
	// 30 hours at 1 Hz, a one-point spike in hour 1.
	const hours = 30
	for i := 0; i < hours*3600; i++ {
		v := int64(i % 7)
		if i == 3600+17 {
			v = 1 << 40
		}
		s.Push(t0.Add(time.Duration(i)*time.Second), v)
	}
	var buckets int
	for _, l := range s.levels {
		buckets += len(l.b) - l.head
	}
	// 10 min of 100 ms + 2 h of 1 s + 24 h of 10 s + the rest in 1 min.
	if want := 6000 + 7200 + 8640 + (hours-26)*60 + 3; buckets > want {
		t.Fatalf("%d buckets after %d hours, want at most %d", buckets, hours, want)
	}
	cols := s.Columns(nil, t0, t0.Add(hours*time.Hour), 200)
	var peak int64
	for _, c := range cols {
		peak = max(peak, c.Max)
	}
	if peak != 1<<40 {
		t.Fatalf("spike lost after aging: peak %d", peak)
	}
	if v, ok := s.At(t0.Add(90 * time.Second)); !ok || v > 6 {
		t.Fatalf("At in the coarsest level = %d, %v", v, ok)
	}
	if _, ok := s.At(t0.Add(-time.Second)); ok {
		t.Fatal("At before the first point is ok")
	}
}

func TestSeriesColumnsZoomedOutUseBucketsOnly(t *testing.T) {
	s := newSeries(10*time.Minute, time.Second, 0)
	t0 := time.Unix(0, 0)
	for i := 0; i < 600*50; i++ {
		s.Push(t0.Add(time.Duration(i)*20*time.Millisecond), int64(i))
	}
	// Columns of 3 s: buckets answer, and give the same min/max/last as the
	// raw points would.
	cols := s.Columns(nil, t0, t0.Add(600*time.Second), 200)
	for i, c := range cols {
		first, last := int64(i*150), int64(i*150+149)
		if !c.Has || c.Min != first || c.Max != last || c.Last != last {
			t.Fatalf("column %d = %+v, want %d..%d", i, c, first, last)
		}
	}
}

func BenchmarkColumnsWholeHour(b *testing.B) {
	s := newSeries(10*time.Minute, time.Second, 0)
	t0 := time.Unix(0, 0)
	for i := 0; i < 3600*50; i++ {
		s.Push(t0.Add(time.Duration(i)*20*time.Millisecond), int64(i%1000))
	}
	var dst []Column
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		dst = s.Columns(dst, t0, t0.Add(time.Hour), 190)
	}
}

// A hook that sends a thousand edges a second (a small model on a fast
// GPU) filled ten minutes of raw points per series: 600,000 each, and a
// million steps took the monitor past 1.3 GB. The raw
// window is bounded by count too, and the buckets keep every peak.
func TestRawWindowIsBoundedByCount(t *testing.T) {
	st := New()
	f := newFeed(1, "fast")
	const edges = 200000 // 200 s of hook time at 1 ms an edge
	for i := 0; i < edges/2; i++ {
		peak := int64(200)
		if i == 1000 {
			peak = 9000 // one spike, long aged out of the raw window
		}
		f.phase("forward", i, 0, 0.001, mem(100, 100, 300), mem(150, peak, 300))
		f.t += 0.001
	}
	st.ApplyAll(f.evs)
	p := st.Process("fast")
	for name, s := range map[string]*Series{"allocated": p.Allocated, "max_allocated": p.MaxAllocated, "reserved": p.Reserved} {
		if n := len(s.raw) - s.head; n > 32768 {
			t.Errorf("%s keeps %d raw points, want at most 32768", name, n)
		}
		if c := cap(s.raw); c > 3*32768 {
			t.Errorf("%s holds a raw buffer of %d points", name, c)
		}
		if s.Len() != edges {
			t.Errorf("%s counted %d points, want %d", name, s.Len(), edges)
		}
	}
	start := time.Unix(wall0, 0)
	if v, ok := p.MaxAllocated.MaxBetween(start, start.Add(10*time.Second)); !ok || v != mib(9000) {
		t.Errorf("the spike at 2 s reads %d MiB (%v) from the buckets, want 9000", v/MiB, ok)
	}
	if v, ok := p.Allocated.At(start.Add(150 * time.Second)); !ok || v != mib(100) && v != mib(150) {
		t.Errorf("allocated at 150 s = %d MiB (%v)", v/MiB, ok)
	}
}

// A live view's series keeps, at every zoom of the chart, a bucket for
// every one of 200 columns, and the peak of the window, though it holds a
// small part of the points.
func TestLiveLevelsFillEveryColumn(t *testing.T) {
	s := newSeriesOf(10*time.Minute, time.Second, liveRawPoints, liveLevels)
	t0 := time.Unix(1_000_000, 0)
	const hz = 500
	const n = 3600 * hz // an hour
	for i := range n {
		v := int64(i % 1000)
		if i == n-7*hz { // a spike 7 s before the end
			v = 1 << 40
		}
		s.Push(t0.Add(time.Duration(i)*time.Second/hz), v)
	}
	end := t0.Add(time.Hour)
	var buckets int
	for _, l := range s.levels {
		buckets += len(l.b) - l.head
	}
	if buckets > 1000+1200+1800+720+60 {
		t.Errorf("%d buckets after an hour", buckets)
	}
	for _, zoom := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
		2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		cols := s.Columns(nil, end.Add(-zoom), end, 200)
		var peak int64
		for i, c := range cols {
			if !c.Has {
				t.Fatalf("zoom %s: column %d has no data", zoom, i)
			}
			peak = max(peak, c.Max)
		}
		if zoom >= 10*time.Second && peak != 1<<40 {
			t.Errorf("zoom %s: peak %d, want the spike", zoom, peak)
		}
	}
}
