package feed

import (
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// A recording started in the middle of a session (`r` in the live view)
// opens with the history the monitor holds, the way the hook replays its
// own to a monitor that starts late (docs/protocol.md, "Delivery, loss and
// replay"): each connection's first steps, then the newest events. So the
// recording has the warmup, the first anatomies and the recent steps, not
// only what comes after the key.

// History bounds: at most headMax events of the connections' first steps
// (their hellos included) and the newest ringMax events of any kind.
const (
	headMax     = 2048
	ringMax     = 4096
	headedSteps = 3 // the steps a connection's head holds: 0, 1 and 2
)

// history keeps the events a mid-session recording writes first.
type history struct {
	head []session.Event
	ring []session.Event // circular, ringMax at most
	next int             // where the ring's next event goes
	done map[uint64]bool // connections whose head is complete
	// evicted is, per connection, the newest seq the ring let go: the
	// file lacks what came before its next kept message.
	evicted map[uint64]uint64
}

// keep adds one event that was put: to its connection's head until that
// connection reaches step headedSteps, else to the ring.
func (h *history) keep(ev session.Event) {
	if h.done == nil {
		h.done, h.evicted = map[uint64]bool{}, map[uint64]uint64{}
	}
	if m := ev.Msg; ev.Conn != 0 && m != nil && !h.done[ev.Conn] {
		if m.Type == ipc.TypeHello || m.Step < headedSteps || m.Type == ipc.TypeSample || m.Type == ipc.TypeStats {
			if len(h.head) < headMax {
				h.head = append(h.head, ev)
				return
			}
		}
		if m.Type != ipc.TypeHello {
			h.done[ev.Conn] = true
		}
	}
	if len(h.ring) < ringMax {
		h.ring = append(h.ring, ev)
		return
	}
	if old := h.ring[h.next]; old.Msg != nil && old.Conn != 0 {
		h.evicted[old.Conn] = max(h.evicted[old.Conn], old.Msg.Seq)
	}
	h.ring[h.next] = ev
	h.next = (h.next + 1) % ringMax
}

// events returns the history in the order it was put: the heads, then the
// ring's events that came after them.
func (h *history) events() (head, recent []session.Event) {
	recent = make([]session.Event, 0, len(h.ring))
	recent = append(append(recent, h.ring[h.next:]...), h.ring[:h.next]...)
	return h.head, recent
}

// writeHistory writes the history to the recording just opened: the heads,
// then the newest events; where a connection's messages resume after a
// stretch the ring let go, a NoteResume first (the messages between are
// not in the file, not lost; a gap on the wire stays a loss), and a
// connection whose hello is not kept opens with it restated at that point.
// f.mu is held.
func (f *Feed) writeHistory() {
	head, recent := f.hist.events()
	hello := map[uint64]bool{}
	last := map[uint64]uint64{} // the newest seq written per connection
	put := func(ev session.Event) {
		if m := ev.Msg; m != nil && ev.Conn != 0 {
			if m.Type == ipc.TypeHello {
				hello[ev.Conn] = true
			} else if !hello[ev.Conn] {
				h := f.hellos[ev.Conn]
				if h == nil {
					return // a connection gone whose hello is not kept: its lines mean nothing alone
				}
				f.record(session.Event{At: ev.At, Conn: ev.Conn, Msg: restated(h, ev.At)})
				hello[ev.Conn] = true
			}
			if seq := last[ev.Conn]; m.Type != ipc.TypeHello && m.Seq > seq+1 && f.hist.evicted[ev.Conn] > seq {
				f.record(session.Event{At: ev.At, Conn: ev.Conn, Note: &session.Note{
					Kind: session.NoteResume, Seq: m.Seq - 1,
					Text: "the monitor no longer held the messages before this one when the recording started",
				}})
			}
			if m.Type != ipc.TypeHello {
				last[ev.Conn] = m.Seq
			}
		}
		f.record(ev)
	}
	for _, ev := range head {
		put(ev)
	}
	for _, ev := range recent {
		put(ev)
	}
}
