package record

import "time"

// Option configures a Writer; pass options to Create.
type Option func(*Writer)

// DefaultFlushInterval is how often a Writer hands buffered events to the
// operating system unless WithFlushInterval says otherwise. A killed
// monitor loses at most about this much of the recording.
const DefaultFlushInterval = time.Second

// WithFlushInterval sets how often buffered events reach the OS (default
// DefaultFlushInterval). Shorter costs more write calls and, with gzip, a
// slightly worse ratio.
func WithFlushInterval(d time.Duration) Option {
	return func(w *Writer) {
		if d > 0 {
			w.interval = d
		}
	}
}

// WithOverwrite lets Create replace an existing file. Without it Create
// refuses, so a recording is never lost to a repeated command line.
func WithOverwrite() Option {
	return func(w *Writer) { w.overwrite = true }
}

// WithGzip forces gzip compression on (true) or off (false) whatever the
// file name. By default a ".gz" suffix turns it on.
func WithGzip(on bool) Option {
	return func(w *Writer) { w.gzip = &on }
}

// withTicker replaces the flush ticker and clock (tests).
func withTicker(tick <-chan time.Time, now func() time.Time) Option {
	return func(w *Writer) { w.tick, w.now = tick, now }
}
