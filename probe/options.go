package probe

import "time"

// Default sampling intervals and the floor below which none goes.
const (
	// DefaultDeviceInterval is how often device memory is read (10 Hz).
	DefaultDeviceInterval = 100 * time.Millisecond
	// DefaultProcessInterval is how often the process list is read (1 Hz):
	// it is a heavy driver call that can stall GPU work when polled fast.
	DefaultProcessInterval = time.Second
	// MinInterval is the floor of both intervals; lower values are raised.
	MinInterval = 100 * time.Millisecond
)

// Ticker delivers ticks on C until Stop; *time.Ticker fits through
// TimeTicker, and tests pass a fake.
type Ticker interface {
	// C is the channel the ticks arrive on.
	C() <-chan time.Time
	// Stop ends the ticks.
	Stop()
}

type timeTicker struct{ t *time.Ticker }

func (t timeTicker) C() <-chan time.Time { return t.t.C }
func (t timeTicker) Stop()               { t.t.Stop() }

// TimeTicker is the production ticker: time.NewTicker.
func TimeTicker(d time.Duration) Ticker { return timeTicker{time.NewTicker(d)} }

// Option configures a Poller.
type Option func(*Poller)

// WithDeviceInterval sets how often device memory is read. Values below
// MinInterval are raised to it (and Poller.Notes says so).
func WithDeviceInterval(d time.Duration) Option {
	return func(p *Poller) { p.devEvery = d }
}

// WithProcessInterval sets how often the process list is read, at most. It
// is read on a device round, so the device interval bounds it from below.
// Values below MinInterval are raised to it (and Poller.Notes says so).
func WithProcessInterval(d time.Duration) Option {
	return func(p *Poller) { p.procEvery = d }
}

// WithClock sets the clock that times the driver calls (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(p *Poller) { p.now = now }
}

// WithTicker sets how the device ticker is made (default TimeTicker).
func WithTicker(newTicker func(time.Duration) Ticker) Option {
	return func(p *Poller) { p.newTicker = newTicker }
}

// SimOption configures a Simulated sampler.
type SimOption func(*Simulated)

// WithSimClock sets the simulated sampler's clock (default time.Now); it
// stamps samples and ages utilization.
func WithSimClock(now func() time.Time) SimOption {
	return func(s *Simulated) { s.now = now }
}

// WithOtherProcess adds a process that is not a hook (another job on the
// same GPU) using the given bytes.
func WithOtherProcess(pid int, used int64) SimOption {
	return func(s *Simulated) { s.others = append(s.others, Process{PID: pid, Used: used}) }
}
