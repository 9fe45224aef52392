package session

import "time"

// Option configures a Store.
type Option func(*Store)

// WithRawWindow sets how long series keep every point before folding older
// ones into buckets (default 10 minutes).
func WithRawWindow(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.limits.window = d
		}
	}
}

// WithMaxRawPoints bounds the raw points each series keeps (default
// DefaultMaxRawPoints); older points live on in the buckets.
func WithMaxRawPoints(n int) Option {
	return func(s *Store) {
		if n >= 16 {
			s.limits.raw = n
		}
	}
}

// WithBucket sets the width of the buckets points are folded into (default
// 1 s; a finer level of a tenth of it serves the last ten minutes). Memory
// per series is about 32 bytes per bucket.
func WithBucket(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.limits.width = d
		}
	}
}

// WithMaxSteps bounds the step table (default 2000 rows: the first tenth of
// them are the session's first steps, the rest the most recent ones; up to
// a tenth more between the trims, which drop a block at a time). The
// per-step peak summaries are kept for every step regardless.
func WithMaxSteps(n int) Option {
	return func(s *Store) {
		if n >= 10 {
			s.limits.steps = n
		}
	}
}

// WithMaxStepPeaks bounds the per-step summaries the diagnosis reads
// (default 10,000: every step of most sessions; beyond, the first tenth of
// them and the newest ones).
func WithMaxStepPeaks(n int) Option {
	return func(s *Store) {
		if n >= 10 {
			s.limits.peaks = n
		}
	}
}

// WithMaxSpans bounds the phase spans kept for the chart (default 20000).
func WithMaxSpans(n int) Option {
	return func(s *Store) {
		if n >= 16 {
			s.limits.spans = n
		}
	}
}

// WithMaxGoneBytes bounds, in bytes, what the store keeps of processes
// that are gone (default DefaultMaxGoneBytes); past it the oldest are
// forgotten, stepless ones first, and counted in Store.Forgotten.
func WithMaxGoneBytes(n int) Option {
	return func(s *Store) {
		if n >= 0 {
			s.limits.goneBytes = n
		}
	}
}

// WithMaxProcesses bounds the processes kept (default DefaultMaxProcesses);
// past it the oldest disconnected ones are forgotten and counted in
// Store.Forgotten.
func WithMaxProcesses(n int) Option {
	return func(s *Store) {
		if n >= 1 {
			s.limits.procs = n
		}
	}
}
