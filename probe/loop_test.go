package probe

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeTicker struct {
	c       chan time.Time
	every   time.Duration
	stopped chan struct{}
}

func (f *fakeTicker) C() <-chan time.Time { return f.c }
func (f *fakeTicker) Stop()               { close(f.stopped) }

// scriptedSampler advances the clock by took per round, as if the driver
// calls took that long, and fails the rounds listed in fail.
type scriptedSampler struct {
	clk   *fakeClock
	took  []time.Duration
	fail  map[int]bool
	mu    sync.Mutex
	calls []bool // withProcesses of each round
}

func (s *scriptedSampler) Devices() ([]Device, error) { return nil, nil }
func (s *scriptedSampler) Status() string             { return "scripted" }
func (s *scriptedSampler) Close() error               { return nil }
func (s *scriptedSampler) Sample(dst []Sample, withProc bool) ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.calls)
	s.calls = append(s.calls, withProc)
	if n < len(s.took) {
		s.clk.add(s.took[n])
	}
	if s.fail[n] {
		return dst[:0], errors.New("device 0: read memory: GPU is lost\nmore")
	}
	smp := Sample{At: s.clk.now(), Device: "GPU-x"}
	if withProc {
		smp.Processes = []Process{}
	}
	return append(dst[:0], smp), nil
}

// harness runs a Poller on a fake ticker; tick sends one tick at the given
// offset from the start and waits for the round it causes.
type harness struct {
	t      *testing.T
	p      *Poller
	clk    *fakeClock
	start  time.Time
	ticker *fakeTicker
	rounds chan []Sample
	cancel context.CancelFunc
	done   <-chan struct{}
}

func newHarness(t *testing.T, s *scriptedSampler, opts ...Option) *harness {
	h := &harness{t: t, clk: s.clk, start: s.clk.now(), rounds: make(chan []Sample, 1)}
	made := make(chan *fakeTicker, 1)
	opts = append(opts, WithClock(s.clk.now), WithTicker(func(d time.Duration) Ticker {
		ft := &fakeTicker{c: make(chan time.Time), every: d, stopped: make(chan struct{})}
		made <- ft
		return ft
	}))
	h.p = NewPoller(s, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = h.p.Start(ctx, func(out []Sample) {
		cp := make([]Sample, len(out))
		for i := range out {
			cp[i] = out[i].Clone()
		}
		h.rounds <- cp
	})
	h.ticker = <-made
	<-h.rounds // the round made at once
	return h
}

func (h *harness) tick(at time.Duration) {
	h.ticker.c <- h.start.Add(at)
	select {
	case <-h.rounds:
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no round after the tick at %v", at)
	}
}

func (h *harness) stop() {
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		h.t.Fatal("poller did not stop")
	}
	select {
	case <-h.ticker.stopped:
	default:
		h.t.Error("ticker not stopped")
	}
}

func TestPollerThrottlesProcessList(t *testing.T) {
	s := &scriptedSampler{clk: newFakeClock()}
	h := newHarness(t, s)
	if h.ticker.every != DefaultDeviceInterval {
		t.Fatalf("ticker every %v", h.ticker.every)
	}
	for i := 1; i <= 25; i++ {
		h.tick(time.Duration(i) * 100 * time.Millisecond)
	}
	h.stop()
	var procRounds []int
	for i, withProc := range s.calls {
		if withProc {
			procRounds = append(procRounds, i)
		}
	}
	// at once, then every 10th tick of 100 ms: 1 Hz
	if want := []int{0, 10, 20}; len(s.calls) != 26 || !equalInts(procRounds, want) {
		t.Errorf("%d rounds, process list in rounds %v; want 26 and %v", len(s.calls), procRounds, want)
	}
	if st := h.p.Stats(); st.Rounds != 26 || st.ProcessRounds != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestPollerCustomRatesAndJitter(t *testing.T) {
	s := &scriptedSampler{clk: newFakeClock()}
	h := newHarness(t, s, WithDeviceInterval(200*time.Millisecond), WithProcessInterval(500*time.Millisecond))
	if d, p := h.p.Intervals(); d != 200*time.Millisecond || p != 500*time.Millisecond || h.ticker.every != d {
		t.Fatalf("intervals %v %v, ticker %v", d, p, h.ticker.every)
	}
	// ticks arrive a little early or late; 600 ms is the first tick past 500 ms
	for _, ms := range []int{201, 399, 598, 802, 1001, 1199} {
		h.tick(time.Duration(ms) * time.Millisecond)
	}
	h.stop()
	want := []bool{true, false, false, true, false, false, true}
	if !equalBools(s.calls, want) {
		t.Errorf("process rounds %v, want %v", s.calls, want)
	}
}

func TestPollerFloor(t *testing.T) {
	p := NewPoller(NewSimulated(), WithDeviceInterval(10*time.Millisecond), WithProcessInterval(0))
	if d, pr := p.Intervals(); d != MinInterval || pr != MinInterval {
		t.Errorf("intervals %v %v, want the %v floor", d, pr, MinInterval)
	}
	notes := p.Notes()
	if len(notes) != 2 || !strings.Contains(notes[0], "device interval 10ms is below the 100ms floor") || !strings.Contains(notes[1], "process list interval 0s") {
		t.Errorf("notes %q", notes)
	}
	if n := NewPoller(NewSimulated()).Notes(); len(n) != 0 {
		t.Errorf("defaults produce notes %q", n)
	}
}

func TestPollerTimesRoundsAndCountsErrors(t *testing.T) {
	s := &scriptedSampler{
		clk:  newFakeClock(),
		took: []time.Duration{3 * time.Millisecond, 40 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond},
		fail: map[int]bool{2: true},
	}
	h := newHarness(t, s)
	h.tick(100 * time.Millisecond)
	h.ticker.c <- h.start.Add(200 * time.Millisecond) // fails: nothing emitted
	h.tick(300 * time.Millisecond)
	st := h.p.Stats()
	h.stop()
	if st.Rounds != 4 || st.Errors != 1 || st.LastTook != 5*time.Millisecond || st.MaxTook != 40*time.Millisecond {
		t.Errorf("stats %+v", st)
	}
	if st.LastErr != "device 0: read memory: GPU is lost" {
		t.Errorf("last error %q, want its first line", st.LastErr)
	}
}

func TestPollerSampleTook(t *testing.T) {
	s := &scriptedSampler{clk: newFakeClock(), took: []time.Duration{7 * time.Millisecond, 9 * time.Millisecond}}
	h := newHarness(t, s)
	h.ticker.c <- h.start.Add(100 * time.Millisecond)
	out := <-h.rounds
	h.stop()
	if len(out) != 1 || out[0].Took != 9*time.Millisecond {
		t.Errorf("samples %+v, want Took 9ms", out)
	}
}

func TestPollerStopsWithoutLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		p := NewPoller(NewSimulated(), WithDeviceInterval(MinInterval))
		done := p.Start(ctx, func([]Sample) {})
		cancel()
		<-done
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	NewPoller(NewSimulated()).Run(ctx, nil) // already cancelled: returns at once
	var now int
	for try := 0; try < 100; try++ {
		if now = runtime.NumGoroutine(); now <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines after stopping, %d before", now, before)
}

// TestPollerRealTicker runs at the floor rate on the real clock for a short
// while: rounds keep coming and the first carries the process list.
func TestPollerRealTicker(t *testing.T) {
	sim := NewSimulated()
	sim.OnMem(0, time.Now(), 1<<30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Sample, 16)
	p := NewPoller(sim, WithDeviceInterval(MinInterval))
	done := p.Start(ctx, func(out []Sample) {
		select {
		case got <- out[0].Clone():
		default:
		}
	})
	first := <-got
	second := <-got
	cancel()
	<-done
	if first.Processes == nil || second.Processes != nil || first.Device != SimulatedUUID {
		t.Errorf("first %+v, second %+v", first, second)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
