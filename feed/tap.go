package feed

import "github.com/vramscope/vramscope/session"

// WithTap hands every event to tap as it is put, in order, like the
// recorder sees them: for a second consumer such as the Prometheus
// exporter (the Prometheus exporter's own feed: its queue). tap runs with the feed's lock held, so
// it must only enqueue; it must not block or call back into the feed.
// Several taps are called in the order they were given.
func WithTap(tap func(session.Event)) Option {
	return func(f *Feed) { f.taps = append(f.taps, tap) }
}
