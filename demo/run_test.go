package demo

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// conn is what the test listener received on one connection.
type conn struct {
	lines [][]byte
	err   error
}

// listener is a plain Unix listener that records every line of every
// connection, standing in for the monitor.
type listener struct {
	path  string
	ln    net.Listener
	mu    sync.Mutex
	conns []*conn
	lines chan struct{} // one tick per line received, never blocks
	ended chan struct{} // one tick per connection that reached EOF
	wg    sync.WaitGroup
}

func listen(t *testing.T) *listener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, path, ln)
}

func serve(t *testing.T, path string, ln net.Listener) *listener {
	l := &listener{path: path, ln: ln, lines: make(chan struct{}, 1<<16), ended: make(chan struct{}, MaxRanks)}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rec := &conn{}
			l.mu.Lock()
			l.conns = append(l.conns, rec)
			l.mu.Unlock()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				sc.Buffer(make([]byte, ipc.MaxMessageBytes), ipc.MaxMessageBytes)
				for sc.Scan() {
					l.mu.Lock()
					rec.lines = append(rec.lines, bytes.Clone(sc.Bytes()))
					l.mu.Unlock()
					select {
					case l.lines <- struct{}{}:
					default:
					}
				}
				l.mu.Lock()
				rec.err = sc.Err()
				l.mu.Unlock()
				l.ended <- struct{}{}
			}()
		}
	}()
	t.Cleanup(l.close)
	return l
}

// close stops accepting and waits for the clients to hang up.
func (l *listener) close() {
	l.ln.Close()
	l.wg.Wait()
}

// received waits for n connections to end and returns the decoded lines of
// each, in accept order.
func (l *listener) received(t *testing.T, n int) [][]*ipc.Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-l.ended:
		case <-timeout:
			t.Fatalf("%d connections ended in 10 s, want %d", i, n)
		}
	}
	l.close()
	var out [][]*ipc.Message
	for i, c := range l.conns {
		if c.err != nil {
			t.Errorf("connection %d: %v", i, c.err)
		}
		var msgs []*ipc.Message
		for _, line := range c.lines {
			m, err := ipc.Decode(line)
			if err != nil {
				t.Fatalf("connection %d: %v: %s", i, err, line)
			}
			msgs = append(msgs, m)
		}
		out = append(out, msgs)
	}
	return out
}

func TestRunSendsTheGeneratedLines(t *testing.T) {
	l := listen(t)
	wall := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	sc := mustLookup(t, "warmup")
	var (
		mems   []ipc.Mem
		ats    []time.Time
		exited []int
	)
	err := Run(context.Background(), l.path, sc, WithSteps(3), WithSpeed(0), WithWall(wall),
		WithOnMem(func(rank int, at time.Time, m ipc.Mem) {
			if rank != 0 {
				t.Errorf("OnMem rank %d", rank)
			}
			mems, ats = append(mems, m), append(ats, at)
		}),
		WithOnExit(func(rank int) { exited = append(exited, rank) }))
	if err != nil {
		t.Fatal(err)
	}
	got := l.received(t, 1)
	if len(got) != 1 {
		t.Fatalf("%d connections, want 1", len(got))
	}
	want := Generate(sc, Config{Steps: 3, Wall: wall})
	if len(got[0]) != len(want) {
		t.Fatalf("received %d lines, want %d", len(got[0]), len(want))
	}
	var wantMems []ipc.Mem
	for i := range want {
		line := marshalAll(t, want[i:i+1])
		if !bytes.Equal(got[0][i].Raw, bytes.TrimSuffix(line, []byte("\n"))) {
			t.Fatalf("line %d:\n got %s\nwant %s", i, got[0][i].Raw, line)
		}
		if m := want[i].Mem; m != nil {
			wantMems = append(wantMems, *m)
		}
	}
	if len(mems) != len(wantMems) {
		t.Fatalf("OnMem called %d times, want %d", len(mems), len(wantMems))
	}
	for i := range mems {
		if mems[i] != wantMems[i] {
			t.Fatalf("OnMem %d: %s, want %s", i, fmtMem(mems[i]), fmtMem(wantMems[i]))
		}
	}
	// The first snapshot is zero_grad's end read (its begin carries none),
	// 13 ms into the run.
	if d := ats[0].Sub(wall); d != inputGap+durZeroGrad {
		t.Errorf("first OnMem at hello + %s, want + %s", d, inputGap+durZeroGrad)
	}
	if len(exited) != 1 || exited[0] != 0 {
		t.Errorf("OnExit calls %v, want [0]", exited)
	}
}

// waitLines waits until the listener has received n lines.
func (l *listener) waitLines(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-l.lines:
		case <-timeout:
			t.Fatalf("received %d lines in 10 s, want %d", i, n)
		}
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	for _, speed := range []float64{0, 1} {
		l := listen(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, l.path, mustLookup(t, "leak"), WithSpeed(speed)) }()
		l.waitLines(t, 5)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("speed %g: Run after cancel: %v", speed, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("speed %g: Run still running 5 s after cancel", speed)
		}
		msgs := l.received(t, 1)[0]
		last := msgs[len(msgs)-1]
		if last.Type != ipc.TypeGoodbye || last.Reason != "exit" {
			t.Fatalf("speed %g: last message %s, want goodbye", speed, last.Raw)
		}
		for i, m := range msgs {
			if m.Seq != uint64(i) {
				t.Fatalf("speed %g: message %d has seq %d: no gap may precede the goodbye", speed, i, m.Seq)
			}
		}
		if last.Stats.Created != last.Seq+1 || last.T < msgs[len(msgs)-2].T {
			t.Errorf("speed %g: goodbye %s", speed, last.Raw)
		}
	}
}

func TestRunPaces(t *testing.T) {
	l := listen(t)
	const speed = 8
	start := time.Now()
	if err := Run(context.Background(), l.path, Scenario{}, WithSteps(1), WithSpeed(speed)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	msgs := l.received(t, 1)[0]
	span := time.Duration((msgs[len(msgs)-1].T - msgs[0].T) * float64(time.Second))
	if elapsed < span/speed {
		t.Errorf("a %s virtual run took %s at speed %d, want at least %s", span, elapsed, speed, span/speed)
	}
}

func TestRunRanks(t *testing.T) {
	l := listen(t)
	var mu sync.Mutex
	ranks := map[int]int{}
	err := Run(context.Background(), l.path, mustLookup(t, "steady"), WithRanks(3), WithSteps(2), WithSpeed(0),
		WithOnMem(func(rank int, _ time.Time, _ ipc.Mem) { mu.Lock(); ranks[rank]++; mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	conns := l.received(t, 3)
	if len(conns) != 3 {
		t.Fatalf("%d connections, want 3", len(conns))
	}
	sessions, pids := map[string]bool{}, map[int]bool{}
	for _, msgs := range conns {
		h := msgs[0]
		if h.Type != ipc.TypeHello || h.Rank == nil || h.WorldSize == nil || *h.WorldSize != 3 || h.PID != PIDBase+*h.Rank {
			t.Fatalf("first line %s", h.Raw)
		}
		sessions[h.Session], pids[h.PID] = true, true
		if last := msgs[len(msgs)-1]; last.Type != ipc.TypeGoodbye {
			t.Errorf("rank %d ends with %s", *h.Rank, last.Type)
		}
	}
	if len(sessions) != 3 || len(pids) != 3 || len(ranks) != 3 {
		t.Errorf("sessions %v, pids %v, OnMem ranks %v: want 3 distinct each", sessions, pids, ranks)
	}
}

func TestRunWaitsForTheMonitor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.sock")
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), path, Scenario{}, WithSteps(1), WithSpeed(0)) }()
	time.Sleep(3 * dialRetry) // Run is retrying by now
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, path, ln)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if msgs := l.received(t, 1); len(msgs) != 1 || msgs[0][0].Type != ipc.TypeHello {
		t.Errorf("received %d connections", len(msgs))
	}
}

func TestRunErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nobody.sock")
	for _, tc := range []struct {
		name string
		path string
		opts []Option
		want string
	}{
		{"no monitor", missing, []Option{WithDialTimeout(120 * time.Millisecond)}, "no vramscope listening"},
		{"empty path", "", nil, "socket path is empty"},
		{"negative steps", missing, []Option{WithSteps(-1)}, "steps -1"},
		{"negative speed", missing, []Option{WithSpeed(-2)}, "speed -2"},
		{"no ranks", missing, []Option{WithRanks(0)}, "ranks 0"},
		{"too many ranks", missing, []Option{WithRanks(MaxRanks + 1)}, "ranks 65"},
		{"bad dial timeout", missing, []Option{WithDialTimeout(0)}, "dial timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), tc.path, Scenario{}, append([]Option{WithSpeed(0)}, tc.opts...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line containing %q", err, tc.want)
			}
			if tc.name == "no monitor" && !strings.Contains(err.Error(), missing) {
				t.Errorf("error %q does not name the socket", err)
			}
		})
	}
}

func TestRunCancelledBeforeTheMonitor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*dialRetry)
	defer cancel()
	if err := Run(ctx, filepath.Join(t.TempDir(), "never.sock"), Scenario{}); err != nil {
		t.Fatalf("Run cancelled while dialling returned %v, want nil (a cancel is a normal stop)", err)
	}
}
