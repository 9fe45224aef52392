package feed

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// bgFailWriter is a recording whose background flush has failed: Write
// still succeeds (the bytes sit in its buffer), only Err knows.
type bgFailWriter struct {
	memWriter
	err error
}

func (w *bgFailWriter) Err() error { return w.err }

// A full disk found by the writer's background flush,
// with no event written since, still stops the recording and is reported.
func TestBackgroundRecordingFailureIsFound(t *testing.T) {
	w := &bgFailWriter{}
	f := New(WithOpener(func(string, string) (Writer, error) { return w, nil }))
	if err := f.Start("rec.jsonl"); err != nil {
		t.Fatal(err)
	}
	if f.Err() != nil || f.Path() != "rec.jsonl" {
		t.Fatalf("healthy recording: err %v, path %q", f.Err(), f.Path())
	}
	w.err = syscall.ENOSPC
	err := f.Err()
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "recording to rec.jsonl stopped") {
		t.Fatalf("Err() = %v", err)
	}
	if f.Path() != "" || !w.closed {
		t.Errorf("after the failure: path %q, writer closed %v", f.Path(), w.closed)
	}
}

// The monitor kept 387 MB after a flood. A consumer
// that falls behind costs at most DefaultLimit events, and once it has
// caught up the flood's events and buffers are collected.
func TestFloodMemoryIsBoundedAndReturned(t *testing.T) {
	f := New()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	line := `{"v":1,"type":"sample","seq":1,"t":1.5,"mem":{"allocated":1,"max_allocated":1,"reserved":1,"max_reserved":1}}`
	// 500,000 messages of about 700 bytes each while nobody reads: 350 MB
	// unbounded.
	for i := 0; i < 500000; i++ {
		m, err := ipc.Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		f.Put(session.Event{At: time.Unix(0, int64(i)), Conn: 1, Msg: m})
	}
	during := heap()
	if f.Overflow() == 0 {
		t.Fatal("nothing overflowed")
	}
	if grew := during - min(before, during); grew > 64<<20 {
		t.Errorf("the feed holds %d MB for a stalled consumer, want under 64 MB", grew>>20)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := f.Next(ctx); err != nil {
		t.Fatal(err)
	}
	f.Put(session.Event{Conn: 1})
	if _, err := f.Next(ctx); err != nil {
		t.Fatal(err)
	}
	after := heap()
	if grew := after - min(before, after); grew > 4<<20 {
		t.Errorf("after the flood the feed still holds %d MB", grew>>20)
	}
	t.Logf("heap: %d KB before, %d KB during (stalled), %d KB after", before>>10, during>>10, after>>10)
}

// Bad lines are counted in full though the server reports them at a
// limited rate: a report stands for itself and the lines it skipped.
func TestRejectedLinesAreCountedInFull(t *testing.T) {
	f := New()
	f.Deliver(ipc.Delivery{Conn: 1, Kind: ipc.Rejected, Err: errors.New("not JSON")})
	f.Deliver(ipc.Delivery{Conn: 1, Kind: ipc.Rejected, Err: errors.New("not JSON (and 41 more)"), Skipped: 41})
	if n := f.Rejected(); n != 43 {
		t.Errorf("Rejected() = %d, want 43", n)
	}
}
