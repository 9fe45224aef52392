package suspect

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// queue is a Source of fixed events.
type queue struct{ evs []session.Event }

func (q *queue) Next(ctx context.Context) ([]session.Event, error) {
	evs := q.evs
	q.evs = nil
	if len(evs) == 0 {
		return nil, ctx.Err()
	}
	return evs, nil
}

func eventsOf(t *testing.T, scenario string, steps int) []session.Event {
	t.Helper()
	sc, err := demo.Lookup(scenario)
	if err != nil {
		t.Fatal(err)
	}
	msgs := demo.Generate(sc, demo.Config{Steps: steps})
	hello := &msgs[0]
	var evs []session.Event
	for i := range msgs {
		if msgs[i].Type == ipc.TypeGoodbye {
			continue // still running: only a connected process is asked
		}
		s := hello.Clock.Wall + (msgs[i].T - hello.Clock.Mono)
		sec, frac := math.Modf(s)
		evs = append(evs, session.Event{At: time.Unix(int64(sec), int64(frac*1e9)), Conn: 7, Msg: &msgs[i]})
	}
	return evs
}

type asked struct {
	conn uint64
	r    ipc.Request
}

// A leaking process is asked once on suspicion, the request recorded as a
// note; a steady one is never asked; a user's Ask is made at the next turn.
func TestAskerAsksALeakOnceAndRecordsIt(t *testing.T) {
	var got []asked
	var notes []session.Event
	q := &queue{evs: eventsOf(t, "leak", 60)}
	a := New(q, func(c uint64, r ipc.Request) error { got = append(got, asked{c, r}); return nil },
		func(ev session.Event) { notes = append(notes, ev) })
	now := time.Unix(1_763_794_800, 0)
	a.Turn(now)
	a.Turn(now.Add(Interval))
	if len(got) != 1 || got[0].conn != 7 || got[0].r.Reason != ipc.CensusSuspect || got[0].r.Type != ipc.RequestCensus {
		t.Fatalf("asked %+v, want one suspect census request on conn 7", got)
	}
	if len(notes) != 1 || notes[0].Note.Kind != session.NoteRequest ||
		!strings.HasPrefix(notes[0].Note.Text, `asked for a census (held memory grows): {"v":1,"type":"census","id":1,"reason":"suspect"}`) {
		t.Fatalf("notes %+v", notes)
	}
	var key string
	for _, p := range a.store.Processes() {
		key = p.Key
	}
	if err := a.Ask(key); err != nil {
		t.Fatal(err)
	}
	a.Turn(now.Add(2 * Interval))
	if len(got) != 2 || got[1].r.Reason != ipc.CensusRequest || got[1].r.ID != 2 {
		t.Fatalf("after Ask: %+v", got)
	}

	got = nil
	steady := New(&queue{evs: eventsOf(t, "steady", 60)}, func(c uint64, r ipc.Request) error { got = append(got, asked{c, r}); return nil },
		func(session.Event) {})
	steady.Turn(now)
	if len(got) != 0 {
		t.Fatalf("a steady run was asked: %+v", got)
	}
}
