package session

import "time"

// PaceByTimeline re-stamps recorded events for replay: each event's At
// becomes the time it happened on the session's timeline (a hook message's
// own clock, an NVML sample's reading time) instead of when the monitor
// received it, kept non-decreasing so the order is unchanged. A replay then
// plays a run at the pace it ran, also when the recording was made faster
// than real time (the demo at full speed) or holds a backlog that a late
// monitor received in one burst (those events play at once, as they did).
func PaceByTimeline(evs []Event) {
	clocks := map[uint64]*Process{}
	var last time.Time
	for i := range evs {
		ev := &evs[i]
		at := ev.At
		switch {
		case ev.Msg != nil:
			p := clocks[ev.Conn]
			if ev.Msg.Clock != nil {
				p = &Process{Hello: *ev.Msg}
				clocks[ev.Conn] = p
			}
			if p != nil {
				at = p.when(ev.Msg.T, ev.At)
			}
		case ev.GPU != nil && !ev.GPU.At.IsZero():
			at = ev.GPU.At
		}
		if at.Before(last) {
			at = last
		}
		ev.At, last = at, at
	}
}
