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

// levelEvents are 200 steps of a run whose every phase the hook read, held
// memory rising once, at step 60, by a buffer kept across steps.
func levelEvents() []session.Event {
	var msgs []ipc.Message
	t := 100.0
	add := func(m ipc.Message) {
		m.V, m.T, m.Seq = 1, t, uint64(len(msgs))
		t += 0.01
		msgs = append(msgs, m)
	}
	add(ipc.Message{Type: ipc.TypeHello, Session: "level", PID: 7, Clock: &ipc.Clock{Mono: 100, Wall: 1_763_794_800},
		CUDA: &ipc.CUDADevice{Index: 0, Name: "NVIDIA H100 80GB HBM3", Total: 85520809984},
		Hook: &ipc.HookConfig{Version: "0.2.0", SampleHz: 50, ExactPeaks: true}})
	mib := int64(session.MiB)
	for i := range 200 {
		h := int64(1900)
		if i >= 60 {
			h = 3436
		}
		for _, e := range []struct {
			name      string
			end, peak int64
		}{{"zero_grad", h, h}, {"forward", h + 1000, h + 1000}, {"loss", h + 1000, h + 1000}, {"backward", h, h + 2000}, {"step", h, h}} {
			add(ipc.Message{Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeBegin})
			add(ipc.Message{Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeEnd, Mem: &ipc.Mem{
				Allocated: e.end * mib, MaxAllocated: e.peak * mib, Reserved: 10000 * mib, MaxReserved: 10000 * mib}})
		}
	}
	evs := make([]session.Event, len(msgs))
	for i := range msgs {
		evs[i] = session.Event{At: time.Unix(1_763_794_800, 0).Add(time.Duration((msgs[i].T - 100) * float64(time.Second))), Conn: 3, Msg: &msgs[i]}
	}
	return evs
}

// A rise to a new level that the anatomy does not explain is asked about
// once, naming its step.
func TestAskerAsksOnceAboutALevelChange(t *testing.T) {
	var got []ipc.Request
	var notes []string
	a := New(&queue{evs: levelEvents()}, func(c uint64, r ipc.Request) error { got = append(got, r); return nil },
		func(ev session.Event) { notes = append(notes, ev.Note.Text) })
	now := time.Unix(1_763_794_900, 0)
	a.Turn(now)
	a.Turn(now.Add(Interval))
	if len(got) != 1 || got[0].Reason != ipc.CensusSuspect || !strings.HasPrefix(notes[0], "asked for a census (held memory rose to a new level at step 60)") {
		t.Fatalf("asked %+v, notes %q", got, notes)
	}
}
