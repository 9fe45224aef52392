package session

import (
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
)

// pace runs evs through one Pacer, in order, as a replay's reader does.
func pace(evs []Event) {
	var p Pacer
	for i := range evs {
		p.Pace(&evs[i])
	}
}

// A backlog received in one burst (its events happened before the monitor
// saw them) plays at once: time never goes back.
func TestPacerNeverGoesBack(t *testing.T) {
	recv := time.Unix(5000, 0)
	hello := &ipc.Message{Type: ipc.TypeHello, T: 10, Clock: &ipc.Clock{Mono: 10, Wall: 1000}}
	evs := []Event{
		{At: recv, Conn: 1, Note: &Note{Kind: NoteConnect}},
		{At: recv, Conn: 1, Msg: hello},
		{At: recv, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, T: 12}},                  // 1002
		{At: recv, GPU: &probe.Sample{At: time.Unix(1001, 0)}},                               // earlier: clamped
		{At: recv, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, T: 15.5}},                // 1005.5
		{At: recv.Add(time.Second), Conn: 2, Msg: &ipc.Message{Type: ipc.TypeSample, T: 99}}, // no hello: receive time
	}
	pace(evs)
	want := []time.Time{recv, recv, recv, recv, recv, recv.Add(time.Second)}
	for i := range evs {
		if !evs[i].At.Equal(want[i]) {
			t.Errorf("event %d at %v, want %v", i, evs[i].At, want[i])
		}
	}
}

func TestPacerFollowsTheHookClock(t *testing.T) {
	recv := time.Unix(6000, 0) // all received in one burst, at the hello
	hello := &ipc.Message{Type: ipc.TypeHello, T: 10, Clock: &ipc.Clock{Mono: 10, Wall: 6000}}
	evs := []Event{
		{At: recv, Conn: 1, Msg: hello},
		{At: recv, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, T: 12}},
		{At: recv, GPU: &probe.Sample{At: time.Unix(6003, 0)}},
		{At: recv, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, T: 15.5}},
	}
	pace(evs)
	want := []time.Time{time.Unix(6000, 0), time.Unix(6002, 0), time.Unix(6003, 0), time.Unix(6005, 500_000_000)}
	for i := range evs {
		if !evs[i].At.Equal(want[i]) {
			t.Errorf("event %d at %v, want %v", i, evs[i].At, want[i])
		}
	}
}

// A connection's hello sets the clock of its later messages, however many
// events of other kinds come between; an NVML reading earlier than the
// last event is clamped.
func TestPacerKeepsEachConnectionsClock(t *testing.T) {
	recv := time.Unix(4000, 0)
	hello := &ipc.Message{Type: ipc.TypeHello, T: 10, Clock: &ipc.Clock{Mono: 10, Wall: 4000}}
	evs := []Event{
		{At: recv, Conn: 1, Msg: hello},
		{At: recv, GPU: &probe.Sample{At: time.Unix(4000, 5e8)}},
		{At: recv.Add(time.Second), Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, T: 11}},
		{At: recv.Add(time.Second), GPU: &probe.Sample{At: time.Unix(3999, 0)}},
		{At: recv.Add(2 * time.Second), Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, T: 13.25}},
	}
	pace(evs)
	want := []time.Time{time.Unix(4000, 0), time.Unix(4000, 5e8), time.Unix(4001, 0), time.Unix(4001, 0), time.Unix(4003, 25e7)}
	for i := range evs {
		if !evs[i].At.Equal(want[i]) {
			t.Errorf("event %d at %v, want %v", i, evs[i].At, want[i])
		}
	}
}
