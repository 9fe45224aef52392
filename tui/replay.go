package tui

import (
	"time"

	"github.com/vramscope/vramscope/session"
)

// speedNames are the replay speeds the 's' key cycles through.
var speedNames = []string{"1×", "4×", "16×", "max"}

var speedFactors = []float64{1, 4, 16, 0}

// maxChunk is how many events "max" speed applies per frame: fast, yet the
// view still moves.
const maxChunk = 50000

// replayClock is the virtual clock of replay mode: events up to now are in
// the store. It holds a window of the recording (WithReplayStream) that a
// reader goroutine refills.
type replayClock struct {
	events     []session.Event // events[:next] are applied
	next       int
	ended      bool      // no event follows events
	start, now time.Time // start: the first event's At (zero before it)
	seen       time.Time // the newest event's At so far
	end        time.Time // the last event's At, once known
	speed      int
	paused     bool
	lastTick   time.Time
	str        *replayStream // the reader of the window
	exits      *exitLog      // told of each applied event's goodbyes
}

// newStreamClock is a clock over a recording read by open, not yet started.
func newStreamClock(open func() (ReplayStream, error), s *replayStream) *replayClock {
	s.open = open
	return &replayClock{str: s}
}

// push adds events that follow those held, first dropping the applied ones
// of a streamed window.
func (r *replayClock) push(evs []session.Event) {
	if len(evs) == 0 {
		return
	}
	if r.next > 0 {
		n := copy(r.events, r.events[r.next:])
		clear(r.events[n:]) // the store keeps what it needs; drop the rest
		r.events, r.next = r.events[:n], 0
	}
	if r.start.IsZero() {
		r.start, r.now = evs[0].At, evs[0].At
	}
	r.events = append(r.events, evs...)
	r.seen = evs[len(evs)-1].At
}

// rebuilding reports whether a seek back is replaying into a fresh store.
func (r *replayClock) rebuilding() bool { return r.str.rb != nil }

// done reports whether every event has been applied.
func (r *replayClock) done() bool { return r.ended && r.next >= len(r.events) && !r.rebuilding() }

// length is the recording's duration: as far as read until its end is known.
func (r *replayClock) length() time.Duration {
	end := r.end
	if end.IsZero() {
		end = r.seen
	}
	if r.start.IsZero() {
		return 0
	}
	return end.Sub(r.start)
}

// tick advances the clock by the real time since the last frame times the
// speed, and applies the events now due to s.
func (r *replayClock) tick(at time.Time, s *session.Store) {
	dt := at.Sub(r.lastTick)
	if r.lastTick.IsZero() || dt < 0 {
		dt = 0
	}
	dt = min(dt, 250*time.Millisecond) // a stalled frame does not jump ahead
	r.lastTick = at
	if r.paused || r.done() || r.rebuilding() || r.start.IsZero() {
		return
	}
	if speedFactors[r.speed] == 0 {
		if r.next >= len(r.events) {
			return // the reader has not caught up
		}
		end := min(r.next+maxChunk, len(r.events))
		r.apply(s, r.events[r.next:end])
		r.next = end
		r.now = r.events[end-1].At
		return
	}
	r.now = r.now.Add(time.Duration(float64(dt) * speedFactors[r.speed]))
	r.applyUntil(s, r.now)
}

// applyUntil applies the events held at or before t.
func (r *replayClock) applyUntil(s *session.Store, t time.Time) {
	end := r.next
	for end < len(r.events) && !r.events[end].At.After(t) {
		end++
	}
	r.apply(s, r.events[r.next:end])
	r.next = end
}

// apply feeds events to s, and their goodbyes to the exit log.
func (r *replayClock) apply(s *session.Store, evs []session.Event) {
	s.ApplyAll(evs)
	r.exits.note(s, evs)
}

// seek moves the clock by d. Going back rebuilds the store from the first
// event (the store only grows) in the reader goroutine, and s is shown
// until the rebuilt store arrives (onReplay); going forward applies the
// events held up to the new time to s, and the rest as they arrive.
func (r *replayClock) seek(d time.Duration, s *session.Store) {
	if r.start.IsZero() {
		return
	}
	t := r.now.Add(d)
	if t.Before(r.start) {
		t = r.start
	}
	if !r.end.IsZero() && t.After(r.end) {
		t = r.end
	}
	switch {
	case r.rebuilding() && r.str.rb.retarget(t):
	case r.rebuilding() || t.Before(r.now):
		r.events, r.next, r.ended = nil, 0, false
		r.str.start(&rebuild{until: t})
	default:
		r.applyUntil(s, t)
	}
	r.now = t
}
