package feed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

type memWriter struct {
	mu     sync.Mutex
	evs    []session.Event
	closed bool
	fail   error
}

func (w *memWriter) Write(ev session.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return w.fail
	}
	w.evs = append(w.evs, ev)
	return nil
}

func (w *memWriter) Close() error { w.closed = true; return nil }

func TestNextCoalescesConcurrentProducers(t *testing.T) {
	f := New()
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				f.Put(session.Event{Conn: uint64(p + 1)})
			}
		}(p)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	got := 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for got < 4000 {
		evs, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", got, err)
		}
		got += len(evs)
	}
	<-done
	if got != 4000 {
		t.Fatalf("got %d events", got)
	}
}

func TestNextReturnsOnCancel(t *testing.T) {
	f := New()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := f.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestDeliverAndSamplesBecomeEvents(t *testing.T) {
	recv := time.Unix(9, 0)
	f := New(WithClock(func() time.Time { return recv }))
	at := time.Unix(5, 0)
	f.Deliver(ipc.Delivery{Conn: 3, At: at, Kind: ipc.Connected})
	f.Deliver(ipc.Delivery{Conn: 3, At: at, Kind: ipc.Received, Msg: &ipc.Message{Type: ipc.TypeSample}})
	f.Deliver(ipc.Delivery{Conn: 3, At: at, Kind: ipc.Rejected, Err: errors.New("not JSON")})
	f.Deliver(ipc.Delivery{Conn: 3, At: at, Kind: ipc.Disconnected})
	procs := []probe.Process{{PID: 1, Used: 2}}
	f.Samples([]probe.Sample{{At: at, Device: "GPU-a", Processes: procs}})
	procs[0].Used = 99 // the caller reuses its buffer
	evs, _ := f.Next(context.Background())
	if len(evs) != 5 {
		t.Fatalf("%d events", len(evs))
	}
	if evs[0].Note.Kind != session.NoteConnect || evs[1].Msg == nil || evs[3].Note.Kind != session.NoteDisconnect {
		t.Fatalf("events %+v", evs)
	}
	if evs[2].Note.Kind != session.NoteError || evs[2].Note.Text != "connection 3: not JSON" {
		t.Fatalf("rejected note %+v", evs[2].Note)
	}
	if evs[4].GPU == nil || evs[4].GPU.Processes[0].Used != 2 {
		t.Fatalf("sample not copied: %+v", evs[4].GPU)
	}
	if !evs[4].At.Equal(recv) || !evs[4].GPU.At.Equal(at) {
		t.Fatalf("sample event at %v (want the receive time %v), sample at %v", evs[4].At, recv, evs[4].GPU.At)
	}
}

func TestRecordingTeesEventsAndStopsOnError(t *testing.T) {
	w := &memWriter{}
	f := New(WithOpener(func(string, string) (Writer, error) { return w, nil }))
	f.Put(session.Event{Conn: 1}) // before recording: written first, as history
	if err := f.Start("run.jsonl"); err != nil {
		t.Fatal(err)
	}
	if f.Path() != "run.jsonl" {
		t.Fatalf("path %q", f.Path())
	}
	if err := f.Start("other.jsonl"); err == nil {
		t.Fatal("second Start succeeded")
	}
	f.Put(session.Event{Conn: 2})
	f.Put(session.Event{Conn: 3})
	if len(w.evs) != 3 || f.Recorded() != 3 {
		t.Fatalf("recorded %d", len(w.evs))
	}
	w.fail = errors.New("disk full")
	f.Put(session.Event{Conn: 4})
	if f.Path() != "" || f.Err() == nil || !w.closed {
		t.Fatalf("recording not stopped after a write error: path %q err %v", f.Path(), f.Err())
	}
	evs, _ := f.Next(context.Background())
	if len(evs) != 4 {
		t.Fatalf("the live stream lost events: %d", len(evs))
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartWithoutOpener(t *testing.T) {
	if err := New().Start("x"); !errors.Is(err, ErrNoOpener) {
		t.Fatalf("err = %v", err)
	}
}

func TestLimitDiscardsOldestAndCounts(t *testing.T) {
	f := New(WithLimit(10))
	for i := 0; i < 25; i++ {
		f.Put(session.Event{Conn: uint64(i)})
	}
	evs, _ := f.Next(context.Background())
	if evs[len(evs)-1].Conn != 24 {
		t.Fatalf("newest event lost")
	}
	kept, skipped := 0, uint64(0)
	for _, ev := range evs {
		if ev.Note != nil && ev.Note.Kind == session.NoteSkip {
			skipped += ev.Note.Count
			continue
		}
		kept++
	}
	if uint64(kept)+f.Overflow() != 25 || skipped != f.Overflow() {
		t.Fatalf("%d kept + %d overflow != 25, or the skip notes count %d", kept, f.Overflow(), skipped)
	}
}

// A recording started mid-session opens with the history the monitor
// holds, hellos included, so it stands on its own; a gap on the wire (41
// after the hello) stays a gap, counted as lost.
func TestRecordingStartedMidSessionCarriesHellos(t *testing.T) {
	w := &memWriter{}
	f := New(WithOpener(func(string, string) (Writer, error) { return w, nil }))
	hello := &ipc.Message{Type: ipc.TypeHello, Session: "a"}
	f.Put(session.Event{Conn: 1, Msg: hello})
	f.Put(session.Event{Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, Seq: 41}})
	f.Put(session.Event{Conn: 2, Msg: &ipc.Message{Type: ipc.TypeHello, Session: "b"}})
	f.Put(session.Event{Conn: 2, Note: &session.Note{Kind: session.NoteDisconnect}})
	if err := f.Start("mid.jsonl"); err != nil {
		t.Fatal(err)
	}
	f.Put(session.Event{Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, Seq: 42}})
	if len(w.evs) != 5 {
		t.Fatalf("recorded %d events, want hello a, sample 41, hello b, b's disconnect, sample 42", len(w.evs))
	}
	if w.evs[0].Msg != hello || w.evs[1].Msg.Seq != 41 || w.evs[2].Msg.Session != "b" || w.evs[3].Note == nil || w.evs[4].Msg.Seq != 42 {
		t.Fatalf("recording opens with %+v, %+v, %+v", w.evs[0], w.evs[1], w.evs[2])
	}
}

func TestTapSeesEveryEventInOrder(t *testing.T) {
	var got []uint64
	f := New(WithTap(func(ev session.Event) { got = append(got, ev.Conn) }))
	for i := uint64(1); i <= 3; i++ {
		f.Put(session.Event{Conn: i})
	}
	evs, err := f.Next(context.Background())
	if err != nil || len(evs) != 3 {
		t.Fatalf("consumer got %d events, %v", len(evs), err)
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("tap saw %v, want 1 2 3", got)
	}
}
