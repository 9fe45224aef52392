package probe

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// PollStats is what a Poller has seen so far, for the header.
type PollStats struct {
	Rounds        int64         // sampling rounds made
	ProcessRounds int64         // rounds that read the process list too
	Errors        int64         // rounds whose Sample returned an error
	LastTook      time.Duration // driver time of the last round
	MaxTook       time.Duration // longest driver time of any round
	LastErr       string        // the last error, "" if none yet
}

// Poller reads a Sampler on its own schedule: device memory every device
// interval, the process list at most every process interval. It owns the
// sampler while it runs (samplers are not safe for concurrent use) but does
// not close it.
type Poller struct {
	s         Sampler
	devEvery  time.Duration
	procEvery time.Duration
	now       func() time.Time
	newTicker func(time.Duration) Ticker
	notes     []string
	buf       []Sample

	mu    sync.Mutex
	stats PollStats
}

// NewPoller returns a Poller for s. Intervals below MinInterval are raised
// to it, and Notes says so.
func NewPoller(s Sampler, opts ...Option) *Poller {
	p := &Poller{
		s:         s,
		devEvery:  DefaultDeviceInterval,
		procEvery: DefaultProcessInterval,
		now:       time.Now,
		newTicker: TimeTicker,
	}
	for _, o := range opts {
		o(p)
	}
	p.devEvery = p.floor("device", p.devEvery)
	p.procEvery = p.floor("process list", p.procEvery)
	return p
}

func (p *Poller) floor(what string, d time.Duration) time.Duration {
	if d >= MinInterval {
		return d
	}
	p.notes = append(p.notes, fmt.Sprintf("%s interval %v is below the %v floor: using %v", what, d, MinInterval, MinInterval))
	return MinInterval
}

// Intervals returns the device and process-list intervals in use, after the
// floor.
func (p *Poller) Intervals() (device, process time.Duration) { return p.devEvery, p.procEvery }

// Notes returns one line per setting that was changed (an interval raised to
// the floor), for the debug log or the header.
func (p *Poller) Notes() []string { return append([]string(nil), p.notes...) }

// Stats returns the counters so far. It is safe to call while Run runs.
func (p *Poller) Stats() PollStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Start runs Run in a new goroutine and returns a channel closed when it
// has ended (after ctx is done).
func (p *Poller) Start(ctx context.Context, emit func([]Sample)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx, emit)
	}()
	return done
}

// Run samples until ctx is done: once at once (with the process list), then
// on every device tick, with the process list when at least the process
// interval has passed since it was last read (a quarter tick of slack absorbs
// ticker jitter). emit gets each non-empty round; the slice and its
// Processes are reused by the next round, so emit must Clone what it keeps.
// A failed round is counted in Stats and sampling goes on.
func (p *Poller) Run(ctx context.Context, emit func([]Sample)) {
	if ctx.Err() != nil {
		return
	}
	t := p.newTicker(p.devEvery)
	defer t.Stop()
	lastProc := p.now()
	p.round(true, emit)
	slack := p.devEvery / 4
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-t.C():
			if ctx.Err() != nil {
				return
			}
			withProc := at.Sub(lastProc) >= p.procEvery-slack
			if withProc {
				lastProc = at
			}
			p.round(withProc, emit)
		}
	}
}

// round reads the sampler once and times it.
func (p *Poller) round(withProc bool, emit func([]Sample)) {
	start := p.now()
	out, err := p.s.Sample(p.buf, withProc)
	took := p.now().Sub(start)
	p.buf = out
	for i := range out {
		out[i].Took = took
	}

	p.mu.Lock()
	p.stats.Rounds++
	if withProc {
		p.stats.ProcessRounds++
	}
	p.stats.LastTook = took
	if took > p.stats.MaxTook {
		p.stats.MaxTook = took
	}
	if err != nil {
		p.stats.Errors++
		p.stats.LastErr = oneLine(err.Error())
	}
	p.mu.Unlock()

	if len(out) > 0 && emit != nil {
		emit(out)
	}
}
