package pipeline_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/pipeline"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// A recording started with r says in its header what it
// holds: mid-session, from which message of which process. One started
// before any connection says nothing of the kind.
func TestRecorderHeaderSaysWhatTheRecordingHolds(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_790_000_142, 0)
	f := feed.New(feed.WithClock(func() time.Time { return now }), feed.WithOpener(pipeline.Recorder("vramscope test", record.SourceDemo)))

	early := filepath.Join(dir, "early.jsonl")
	if err := f.Start(early); err != nil {
		t.Fatal(err)
	}
	f.Put(session.Event{At: now, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeHello, Session: "s", PID: 4242}})
	f.Put(session.Event{At: now, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, Seq: 3616}})
	f.Put(session.Event{At: now, Conn: 1, Msg: &ipc.Message{Type: ipc.TypeSample, Seq: 3617}})
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	mid := filepath.Join(dir, "mid.jsonl")
	if err := f.Start(mid); err != nil {
		t.Fatal(err)
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if b := begins(t, early); b != "" {
		t.Errorf("a recording from the start says %q", b)
	}
	b := begins(t, mid)
	for _, want := range []string{"mid-session", "pid 4242 from its message 3618", "it opens with what the monitor held of before"} {
		if !strings.Contains(b, want) {
			t.Errorf("meta.begins %q lacks %q", b, want)
		}
	}
}

func begins(t *testing.T, path string) string {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Header().Begins
}
