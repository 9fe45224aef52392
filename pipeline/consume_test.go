package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/pipeline"
	"github.com/vramscope/vramscope/session"
)

// hello is a hook's first message on connection conn.
func hello(conn uint64, sess string, pid int) session.Event {
	return session.Event{At: time.Unix(1_790_000_000, 0), Conn: conn,
		Msg: &ipc.Message{Type: ipc.TypeHello, Session: sess, PID: pid}}
}

// Consume applies what arrives and stops when keepOn says so, with no
// event to wake it; Drain applies what is pending and returns once the
// feed stays quiet for its wait.
func TestConsumeAndDrain(t *testing.T) {
	f := feed.New()
	s := session.New()
	f.Put(hello(1, "s1", 1))
	checks := 0
	start := time.Now()
	pipeline.Consume(context.Background(), f, s, 10*time.Millisecond, func() bool { checks++; return checks < 3 })
	if checks != 3 || len(s.Processes()) != 1 {
		t.Fatalf("after Consume: %d checks, %d processes; want 3 and 1", checks, len(s.Processes()))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Consume took %v to stop", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pipeline.Consume(ctx, f, s, time.Hour, func() bool { t.Error("keepOn asked after ctx was done"); return true })

	f.Put(hello(2, "s2", 2))
	pipeline.Drain(f, s, 20*time.Millisecond)
	if len(s.Processes()) != 2 {
		t.Errorf("after Drain: %d processes, want 2", len(s.Processes()))
	}
}
