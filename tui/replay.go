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

// replayClock is the virtual clock of replay mode over in-memory events:
// events up to now are in the store.
type replayClock struct {
	events     []session.Event
	next       int // events[:next] are applied
	start, now time.Time
	speed      int
	paused     bool
	lastTick   time.Time
}

func newReplayClock(events []session.Event) *replayClock {
	r := &replayClock{events: events}
	if len(events) > 0 {
		r.start = events[0].At
		r.now = r.start
	}
	return r
}

// done reports whether every event has been applied.
func (r *replayClock) done() bool { return r.next >= len(r.events) }

// length is the recording's duration.
func (r *replayClock) length() time.Duration {
	if len(r.events) == 0 {
		return 0
	}
	return r.events[len(r.events)-1].At.Sub(r.start)
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
	if r.paused || r.done() {
		return
	}
	if speedFactors[r.speed] == 0 {
		end := min(r.next+maxChunk, len(r.events))
		s.ApplyAll(r.events[r.next:end])
		r.next = end
		r.now = r.events[end-1].At
		return
	}
	r.now = r.now.Add(time.Duration(float64(dt) * speedFactors[r.speed]))
	r.applyUntil(s, r.now)
}

// applyUntil applies the events at or before t.
func (r *replayClock) applyUntil(s *session.Store, t time.Time) {
	end := r.next
	for end < len(r.events) && !r.events[end].At.After(t) {
		end++
	}
	s.ApplyAll(r.events[r.next:end])
	r.next = end
}

// seek moves the clock by d. Going back rebuilds the store from the first
// event (the store only grows), which is why it returns the store to use.
func (r *replayClock) seek(d time.Duration, s *session.Store, fresh func() *session.Store) *session.Store {
	if len(r.events) == 0 {
		return s
	}
	t := r.now.Add(d)
	if t.Before(r.start) {
		t = r.start
	}
	if end := r.events[len(r.events)-1].At; t.After(end) {
		t = end
	}
	if t.Before(r.now) {
		s, r.next = fresh(), 0
	}
	r.now = t
	r.applyUntil(s, t)
	return s
}
