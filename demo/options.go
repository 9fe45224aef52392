package demo

import (
	"fmt"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// Option configures Run.
type Option func(*settings)

// settings is what Run does; the zero value is not valid, see defaults.
type settings struct {
	steps       int
	speed       float64
	ranks       int
	firstRank   int
	worldSize   int
	host        string
	job         *ipc.Job
	wall        time.Time
	onMem       func(rank int, at time.Time, m ipc.Mem)
	onExit      func(rank int)
	dialTimeout time.Duration
}

func defaults() settings {
	return settings{speed: 1, ranks: 1, dialTimeout: 5 * time.Second}
}

func (s settings) check() error {
	switch {
	case s.steps < 0:
		return fmt.Errorf("demo steps %d: must be 0 (until stopped) or more", s.steps)
	case s.speed < 0 || s.speed != s.speed || s.speed > 1e6:
		return fmt.Errorf("demo speed %g: must be 0 (no pacing) or a positive factor up to 1e6", s.speed)
	case s.ranks < 1 || s.ranks > MaxRanks:
		return fmt.Errorf("demo ranks %d: must be between 1 and %d", s.ranks, MaxRanks)
	case s.firstRank < 0 || s.worldSize < 0:
		return fmt.Errorf("demo first rank %d, world size %d: must not be negative", s.firstRank, s.worldSize)
	case s.dialTimeout <= 0:
		return fmt.Errorf("demo dial timeout %s: must be positive", s.dialTimeout)
	}
	return nil
}

// MaxRanks is the most ranks Run simulates.
const MaxRanks = 64

// WithSteps makes each rank run n optimizer steps and then say goodbye. The
// default, 0, runs until the context is cancelled.
func WithSteps(n int) Option { return func(s *settings) { s.steps = n } }

// WithSpeed scales the pacing: messages are sent when their virtual time,
// divided by speed, has passed since Run started. The default is 1 (real
// time); 0 sends as fast as the socket takes them.
func WithSpeed(speed float64) Option { return func(s *settings) { s.speed = speed } }

// WithRanks simulates n ranks of one torchrun job on one machine (default
// 1), each with its own connection, pid, session and RankOffset.
func WithRanks(n int) Option { return func(s *settings) { s.ranks = n } }

// WithWall sets the wall-clock time of the hellos (the start of the virtual
// clock). The default is the time Run starts.
func WithWall(t time.Time) Option { return func(s *settings) { s.wall = t } }

// WithOnMem calls f for every allocator snapshot right after it was sent,
// with the rank and the snapshot's wall time on the hook's clock (hello
// wall + virtual time), for instance to drive probe's simulated sampler.
// Calls are serialized across ranks.
func WithOnMem(f func(rank int, at time.Time, m ipc.Mem)) Option {
	return func(s *settings) { s.onMem = f }
}

// WithOnExit calls f once a rank has stopped (after its goodbye, or after
// its connection failed). Calls are serialized with OnMem's.
func WithOnExit(f func(rank int)) Option { return func(s *settings) { s.onExit = f } }

// WithDialTimeout bounds how long Run retries connecting to a monitor that
// is not listening yet (default 5 s).
func WithDialTimeout(d time.Duration) Option { return func(s *settings) { s.dialTimeout = d } }

// WithJob plays ranks of one node of a bigger job: their ranks start at
// firstRank (default 0) in a job of worldSize ranks (default firstRank
// plus the ranks played), their hellos name host ("" keeps DefaultHost)
// and carry job (nil: none), as the hook reads it from a launcher's
// environment.
func WithJob(firstRank, worldSize int, host string, job *ipc.Job) Option {
	return func(s *settings) { s.firstRank, s.worldSize, s.host, s.job = firstRank, worldSize, host, job }
}
