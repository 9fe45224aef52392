package session

import "time"

// Pacer re-stamps recorded events for replay, one at a time: each event's
// At becomes the time it happened on the session's timeline (a hook
// message's own clock, an NVML sample's reading time) instead of when the
// monitor received it, kept non-decreasing so the order is unchanged. A
// replay then plays a run at the pace it ran, also when the recording was
// made faster than real time (the demo at full speed) or holds a backlog
// that a late monitor received in one burst (those events play at once,
// as they did). Feed it every event in order from the first; the zero
// value is ready to use.
type Pacer struct {
	clocks map[uint64]*Process // per connection, the hello in effect
	last   time.Time
}

// Pace re-stamps ev.At, the event that follows those already paced.
func (p *Pacer) Pace(ev *Event) {
	at := ev.At
	switch {
	case ev.Msg != nil:
		c := p.clocks[ev.Conn]
		if ev.Msg.Clock != nil {
			if p.clocks == nil {
				p.clocks = map[uint64]*Process{}
			}
			c = &Process{Hello: *ev.Msg}
			p.clocks[ev.Conn] = c
		}
		if c != nil {
			at = c.when(ev.Msg.T, ev.At)
		}
	case ev.GPU != nil && !ev.GPU.At.IsZero():
		at = ev.GPU.At
	}
	if at.Before(p.last) {
		at = p.last
	}
	ev.At, p.last = at, at
}
