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
// 1 s; finer and coarser levels are fractions and multiples of it: see
// Series). Memory per series is about 32 bytes per bucket.
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

// DefaultMaxSpans bounds the phase spans a process keeps for the chart
// (about 240 bytes each): every phase of the last 1,024 and the largest of
// each stretch before them (Process.compactSpans).
const DefaultMaxSpans = 2048

// WithMaxSpans bounds the phase spans kept for the chart (default
// DefaultMaxSpans).
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

// Live bounds: what the live view shows and its diagnosis reads of a
// process, so that a monitor of hundreds of busy processes stays within a
// few MB each (bench/monitor). A report or an export reads a whole
// recording with the wider defaults instead.
const (
	liveSteps     = 300  // the table's first 30 steps and newest 270
	livePeaks     = 1000 // the first 100 step summaries and the newest 900
	liveSpans     = 1024 // every phase of the last 512, the largest before
	liveRawPoints = 1024 // a series' newest points; liveLevels beyond
)

// WithLiveBounds bounds the store for a live view (the TUI's store, live
// or replayed, and record's): a shorter step table (300 rows), fewer step
// summaries for the diagnosis (1,000), fewer spans (1,024) and raw points
// (1,024 a series), and buckets at the resolution the chart draws
// (liveLevels), where a report keeps more to answer exactly about any time.
func WithLiveBounds() Option {
	return func(s *Store) {
		s.limits.steps, s.limits.peaks, s.limits.spans = liveSteps, livePeaks, liveSpans
		s.limits.raw, s.limits.levels = liveRawPoints, liveLevels
	}
}

// reportPeakRawPoints are the raw points of the peak counter's curve
// (Process.MaxAllocated) in a report's store.
const reportPeakRawPoints = 16

// WithReportBounds bounds the store for a report (report, the job view):
// the peak counter's curve, which is drawn (tui, plot, exports) but never
// asked for its value at a time by the diagnosis, keeps its maximum and
// its buckets and only its newest reportPeakRawPoints raw points. Every
// other bound is the whole recording's, so the report's figures are those
// of any other store that reads it: 64 busy ranks held 37 MB of raw points
// no figure read.
func WithReportBounds() Option {
	return func(s *Store) { s.limits.peakRaw = reportPeakRawPoints }
}
