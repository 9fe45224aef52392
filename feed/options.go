package feed

import "time"

// Option configures a Feed.
type Option func(*Feed)

// WithOpener lets the feed record: open creates the recording file.
func WithOpener(open Opener) Option { return func(f *Feed) { f.open = open } }

// WithLimit bounds the events pending for a slow consumer (default DefaultLimit);
// past it the oldest half is discarded and counted in Overflow.
func WithLimit(n int) Option {
	return func(f *Feed) {
		if n > 0 {
			f.limit = n
		}
	}
}

// WithClock sets the clock that stamps NVML samples' events (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(f *Feed) { f.now = now } }
