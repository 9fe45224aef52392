package feed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// TestOwnDropsAreNotLoss: when the feed's queue overflowed, record printed
// "163840 lost" though the recording was complete (report said lost 0):
// the store saw the monitor's own drops as seq gaps.
// Now they are counted apart, as skipped, and the hook's session survives
// the loss of its hello from the queue.
func TestOwnDropsAreNotLoss(t *testing.T) {
	w := &memWriter{}
	f := New(WithLimit(1000), WithOpener(func(string, string) (Writer, error) { return w, nil }))
	if err := f.Start("rec"); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1763794800, 0)
	put := func(conn uint64, m *ipc.Message) {
		f.Put(session.Event{At: at, Conn: conn, Msg: m})
		at = at.Add(time.Millisecond)
	}
	for _, c := range []uint64{1, 2} {
		put(c, &ipc.Message{V: 1, Type: ipc.TypeHello, Session: "s" + string(rune('0'+c)), PID: int(c),
			Clock: &ipc.Clock{Mono: 0, Wall: float64(at.Unix())}})
	}
	const n = 5000 // per connection, while nobody reads
	for i := 1; i <= n; i++ {
		for _, c := range []uint64{1, 2} {
			put(c, &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: uint64(i), T: float64(i) / 1000,
				Mem: &ipc.Mem{Allocated: int64(i), MaxAllocated: int64(i), Reserved: 1 << 20, MaxReserved: 1 << 20}})
		}
	}
	f.Put(session.Event{At: at, GPU: nil, Conn: 0, Note: &session.Note{Kind: session.NoteInfo, Text: "x"}})
	if f.Overflow() == 0 {
		t.Fatal("nothing overflowed")
	}
	st := session.New()
	evs, err := f.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.ApplyAll(evs)
	if len(st.Processes()) != 2 {
		t.Fatalf("%d processes known after the overflow, want 2 (errors %d: %s)", len(st.Processes()), st.Errors, st.LastError)
	}
	for _, p := range st.Processes() {
		if p.Lost != 0 {
			t.Errorf("%s: %d lost, want 0: the monitor skipped them, the socket lost none", p.Key, p.Lost)
		}
		if p.Skipped == 0 || p.Skipped >= n {
			t.Errorf("%s: %d skipped", p.Key, p.Skipped)
		}
		if _, v, ok := p.Allocated.Last(); !ok || v != n {
			t.Errorf("%s: newest allocated %d, want %d", p.Key, v, n)
		}
	}
	if st.Skipped != f.Overflow() {
		t.Errorf("the store counts %d skipped, the feed %d", st.Skipped, f.Overflow())
	}
	if st.Errors != 0 {
		t.Errorf("%d errors: %s", st.Errors, st.LastError)
	}
	w.mu.Lock()
	got := len(w.evs)
	w.mu.Unlock()
	if got != 2+2*n+1 {
		t.Errorf("the recording has %d events, want every one of %d", got, 2+2*n+1)
	}
}

// TestRefusedPeersAreCounted: a connection the server refused is counted
// by the feed (for the summary) and by the store (for the live view), not
// forgotten as before.
func TestRefusedPeersAreCounted(t *testing.T) {
	f := New()
	f.Deliver(ipc.Delivery{At: time.Unix(1763794800, 0), Kind: ipc.Refused, Err: errors.New("refused a connection: already 256 connections open")})
	evs, err := f.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := session.New()
	st.ApplyAll(evs)
	if f.Refused() != 1 || st.Refused != 1 {
		t.Errorf("feed counts %d refused, store %d; want 1 and 1", f.Refused(), st.Refused)
	}
}
