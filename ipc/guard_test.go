package ipc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// 256 idle connections locked out every new hook.
// A full server of connections that never said hello makes room for a hook
// at once (the oldest silent one is closed), and the silent ones are closed
// after the hello timeout anyway.
func TestIdleConnectionsDoNotLockOutAHook(t *testing.T) {
	s, col := serve(t, WithHelloTimeout(1500*time.Millisecond))
	idle := make([]net.Conn, DefaultMaxConns)
	for i := range idle {
		idle[i] = dial(t, s)
		defer idle[i].Close()
	}
	col.waitFor(t, "256 idle connections", func(ds []Delivery) bool { return countKind(ds, Connected) == DefaultMaxConns })
	time.Sleep(evictGrace) // past the grace that protects a newcomer's hello
	hook := dial(t, s)
	defer hook.Close()
	start := time.Now()
	if _, err := hook.Write([]byte(helloLine("hook"))); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "the hook's hello", func(ds []Delivery) bool { return countKind(ds, Received) == 1 })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the hook's hello took %v: it waited for the hello timeout instead of getting a slot", took)
	}
	ds := col.waitFor(t, "every idle connection closed", func(ds []Delivery) bool { return countKind(ds, Disconnected) == DefaultMaxConns })
	evicted, timedOut := 0, 0
	for _, d := range ds {
		switch {
		case d.Kind != Disconnected:
		case errors.Is(d.Err, errEvicted):
			evicted++
		case errors.Is(d.Err, ErrIdle) && strings.Contains(d.Err.Error(), "no hello within 1.5s"):
			timedOut++
		default:
			t.Errorf("conn %d ended with %v", d.Conn, d.Err)
		}
	}
	if evicted != 1 || timedOut != DefaultMaxConns-1 {
		t.Errorf("evicted %d, timed out %d: want 1 and %d", evicted, timedOut, DefaultMaxConns-1)
	}
	// The hook is still served.
	if _, err := hook.Write([]byte(sampleLine(1))); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "the hook's sample", func(ds []Delivery) bool { return countKind(ds, Received) == 2 })
	_, logs := col.snapshot()
	if len(logs) > logBurst+1 {
		t.Errorf("%d log lines for 256 timeouts: the log is not rate-limited", len(logs))
	}
}

// Lines before the hello do not buy time: the hello timeout is counted
// from the connect.
func TestHelloTimeoutIsNotExtendedByBadLines(t *testing.T) {
	s, col := serve(t, WithHelloTimeout(300*time.Millisecond))
	c := dial(t, s)
	defer c.Close()
	start := time.Now()
	go func() {
		for i := 0; i < 30; i++ {
			if _, err := fmt.Fprint(c, sampleLine(i+1)); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	ds := col.waitFor(t, "the connection closed", func(ds []Delivery) bool { return countKind(ds, Disconnected) == 1 })
	if took := time.Since(start); took > time.Second {
		t.Errorf("closed after %v: lines before the hello extended its timeout", took)
	}
	if last := ds[len(ds)-1]; !errors.Is(last.Err, ErrIdle) || !strings.Contains(last.Err.Error(), "no hello within 300ms") {
		t.Errorf("ended with %v", last.Err)
	}
}

func TestIdleTimeoutAfterHello(t *testing.T) {
	s, col := serve(t, WithIdleTimeout(300*time.Millisecond))
	c := dial(t, s)
	defer c.Close()
	fmt.Fprint(c, helloLine("quiet"))
	// Lines keep it open past the idle timeout.
	for i := 1; i <= 6; i++ {
		time.Sleep(100 * time.Millisecond)
		fmt.Fprint(c, sampleLine(i))
	}
	ds := col.waitFor(t, "the silent connection closed", func(ds []Delivery) bool { return countKind(ds, Disconnected) == 1 })
	if n := countKind(ds, Received); n != 7 {
		t.Errorf("%d messages received before the idle close, want 7", n)
	}
	last := ds[len(ds)-1]
	if !errors.Is(last.Err, ErrIdle) || !strings.Contains(last.Err.Error(), "no line for 300ms") {
		t.Errorf("ended with %v, want the idle timeout", last.Err)
	}
}

// With flooding clients a connected hook hit its 2 s
// send timeout. Here 255 connections (the server's limit less the hook)
// write valid lines as fast as they can while a hook sends 500 lines a
// second with the hook's own 2 s send timeout; deliver takes a lock and
// does a little work for every line, as the feed does. Every hook line must
// arrive, none of its writes may time out, and its lines must not wait
// behind the flood.
func TestFloodDoesNotStarveAHook(t *testing.T) {
	flooders := DefaultMaxConns - 1
	if testing.Short() || raceEnabled {
		flooders = 64 // the race detector slows every line tenfold
	}
	var (
		mu       sync.Mutex
		sink     int
		hookConn atomic.Uint64
		hookGot  = make(chan *Message, 4096)
		flooded  atomic.Int64
	)
	deliver := func(d Delivery) {
		mu.Lock() // the feed's lock, held for a recording write
		for i := 0; i < 200; i++ {
			sink += i
		}
		mu.Unlock()
		if d.Kind != Received {
			return
		}
		if d.Conn == hookConn.Load() {
			hookGot <- d.Msg
		} else {
			flooded.Add(1)
		}
	}
	path := filepath.Join(shortDir(t), "s.sock")
	s, err := Listen(WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, deliver) }()
	defer func() { cancel(); <-served }()

	hookConn.Store(1) // the first connection
	hook := dial(t, s)
	defer hook.Close()
	fmt.Fprint(hook, helloLine("hook"))
	if m := <-hookGot; m.Type != TypeHello {
		t.Fatalf("first hook message %q", m.Type)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	batch := strings.Repeat(sampleLine(1), 200)
	for i := 0; i < flooders; i++ {
		c := dial(t, s)
		defer c.Close()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			fmt.Fprint(c, helloLine(fmt.Sprint("flood", i)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				c.Write([]byte(batch))
			}
		}(i)
	}
	defer func() { close(stop); wg.Wait() }()
	for flooded.Load() < int64(100*flooders) {
		time.Sleep(10 * time.Millisecond)
	}

	const lines = 1000 // two seconds at 500 lines a second
	var worst time.Duration
	sent := make(map[uint64]time.Time, lines)
	var sentMu sync.Mutex
	wrote := make(chan error, 1)
	go func() {
		for seq := 1; seq <= lines; seq++ {
			hook.SetWriteDeadline(time.Now().Add(2 * time.Second)) // the hook's send timeout
			sentMu.Lock()
			sent[uint64(seq)] = time.Now()
			sentMu.Unlock()
			if _, err := hook.Write([]byte(sampleLine(seq))); err != nil {
				wrote <- fmt.Errorf("hook write %d: %w", seq, err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		wrote <- nil
	}()
	for seq := uint64(1); seq <= lines; seq++ {
		select {
		case m := <-hookGot:
			if m.Seq != seq {
				t.Fatalf("hook message %d arrived as %d", seq, m.Seq)
			}
			sentMu.Lock()
			worst = max(worst, time.Since(sent[seq]))
			sentMu.Unlock()
		case <-time.After(10 * time.Second):
			t.Fatalf("hook message %d did not arrive in 10 s (flooders delivered %d lines)", seq, flooded.Load())
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d flooders delivered %d lines; the hook's worst line latency %v", flooders, flooded.Load(), worst)
	if worst > time.Second {
		t.Errorf("a hook line waited %v behind the flood", worst)
	}
}

// 3 MB of bad lines became 140 MB of stderr and a
// 262 MB recording, one report per line. Reports are now limited per
// connection, and every skipped line is still counted.
func TestBadLinesAreReportedAtALimitedRate(t *testing.T) {
	s, col := serve(t)
	c := dial(t, s)
	const bad = 20000
	w := bufio.NewWriter(c)
	for i := 0; i < bad; i++ {
		w.WriteString("x\n")
	}
	w.Flush()
	c.Close()
	ds := col.waitFor(t, "every bad line counted", func(ds []Delivery) bool { return rejectsCounted(ds) == bad })
	_, logs := col.snapshot()
	rejected := countKind(ds, Rejected)
	if rejected > rejectBurst+4 || len(logs) > rejectBurst+4 {
		t.Fatalf("%d bad lines gave %d reports and %d log lines: not limited", bad, rejected, len(logs))
	}
	// Each report stands for its own line plus the count it carries, in
	// Skipped and in its text.
	total, fromText := uint64(0), 0
	for _, d := range ds {
		if d.Kind != Rejected {
			continue
		}
		total += 1 + d.Skipped
		var n int
		msg := d.Err.Error()
		switch {
		case strings.Contains(msg, "more bad lines") && strings.Contains(msg, "skipped without a report"):
			fmt.Sscanf(msg, "%d more", &n)
		case strings.Contains(msg, "(and "):
			fmt.Sscanf(msg[strings.Index(msg, "(and ")+5:], "%d", &n)
			n++
		default:
			n = 1
		}
		fromText += n
	}
	if total != bad || fromText != bad {
		t.Errorf("reports account for %d bad lines (%d by their text), want %d", total, fromText, bad)
	}
}

// rejectsCounted is how many bad lines the Rejected deliveries stand for.
func rejectsCounted(ds []Delivery) uint64 {
	n := uint64(0)
	for _, d := range ds {
		if d.Kind == Rejected {
			n += 1 + d.Skipped
		}
	}
	return n
}

// TestBadLinesOfManyConnectionsShareOneBudget: the report budget was per
// connection, so 3,000 short connections of 12 bad lines each gave 30,000
// reports: 2.54 MB of stderr and a 5.58 MB recording. The budget is the
// server's now, and every bad line is still counted, exactly.
func TestBadLinesOfManyConnectionsShareOneBudget(t *testing.T) {
	s, col := serve(t)
	const conns, each = 3000, 12
	start := time.Now()
	for i := 0; i < conns; i++ {
		c := dial(t, s)
		c.Write([]byte(strings.Repeat("x\n", each)))
		c.Close()
	}
	ds := col.waitFor(t, "every bad line counted", func(ds []Delivery) bool { return rejectsCounted(ds) == conns*each })
	_, logs := col.snapshot()
	budget := rejectBurst + 2*int(time.Since(start)/rejectEvery+1)
	if r := countKind(ds, Rejected); r > budget || len(logs) > budget+logBurst {
		t.Errorf("%d bad lines on %d connections in %v gave %d reports and %d log lines, want at most %d", conns*each, conns, time.Since(start).Round(time.Millisecond), r, len(logs), budget)
	}
}

// The monitor reads each peer's uid (SO_PEERCRED) and serves only its own.
// Here the server is told that its user is another uid, so this test's own
// connection is the foreign one.
func TestForeignPeerIsRefused(t *testing.T) {
	s, col := serve(t, WithPeerUID(os.Geteuid()+1))
	c := dial(t, s)
	defer c.Close()
	fmt.Fprint(c, helloLine("intruder"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a foreign peer's connection was not closed: %v", err)
	}
	ds, logs := col.snapshot()
	if len(ds) != 0 {
		t.Errorf("a foreign peer produced deliveries: %+v", ds)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], fmt.Sprintf("from uid %d", os.Geteuid())) {
		t.Errorf("logs %q: want one line naming the peer's uid", logs)
	}
}

// The same with a real second user: a helper process switched to uid 65534
// connects. It needs root to switch uid, and the socket's directory opened
// to others (a monitor never does that; the test does it to reach the
// SO_PEERCRED check behind it).
func TestOtherUserIsRefused(t *testing.T) {
	if os.Getenv("VRAMSCOPE_PEER_HELPER") != "" {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("switching to another uid needs root; TestForeignPeerIsRefused covers the check")
	}
	s, col := serve(t)
	if err := os.Chmod(filepath.Dir(s.Path()), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Path(), 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
try:
    s.sendall(sys.argv[2].encode()); print("closed" if s.recv(1)==b"" else "open")
except (ConnectionResetError, BrokenPipeError):
    print("closed")`, s.Path(), helloLine("other"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("cannot run a helper as uid 65534 here: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "closed" {
		t.Errorf("helper says %q: the other user's connection was kept", out)
	}
	ds, logs := col.snapshot()
	if len(ds) != 0 || len(logs) != 1 || !strings.Contains(logs[0], "from uid 65534") {
		t.Errorf("deliveries %+v, logs %q: want none and one refusal", ds, logs)
	}
}

// A seq of 2^64-1 made every later message a
// duplicate. Such a seq is refused, and so is a jump past 2^40 on one
// connection; the messages after it are kept.
func TestSeqJumpIsRefused(t *testing.T) {
	s, col := serve(t)
	c := dial(t, s)
	defer c.Close()
	fmt.Fprint(c, helloLine("jumpy"))
	fmt.Fprint(c, sampleLine(1))
	fmt.Fprint(c, strings.Replace(sampleLine(2), `"seq":2`, `"seq":18446744073709551615`, 1))
	fmt.Fprint(c, strings.Replace(sampleLine(3), `"seq":3`, fmt.Sprintf(`"seq":%d`, uint64(1)<<41), 1))
	fmt.Fprint(c, sampleLine(4))
	ds := col.waitFor(t, "five lines", func(ds []Delivery) bool { return countKind(ds, Received)+countKind(ds, Rejected) == 5 })
	var got []string
	for _, d := range ds {
		switch d.Kind {
		case Received:
			got = append(got, fmt.Sprint(d.Msg.Seq))
		case Rejected:
			got = append(got, "rejected: "+d.Err.Error())
		}
	}
	want := []string{"0", "1", "rejected: field seq: larger than 2^53",
		"rejected: field seq: jumps from 1 to 2199023255552 on this connection (at most 2^40 at once)", "4"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// A storm of new connections does not push out a hook whose hello is on
// its way: connections younger than evictGrace are not evicted, the storm's
// extra connections are refused instead.
func TestAStormDoesNotEvictANewcomer(t *testing.T) {
	s, col := serve(t, WithMaxConns(3))
	hook := dial(t, s)
	defer hook.Close()
	for i := 0; i < 6; i++ {
		c := dial(t, s)
		defer c.Close()
	}
	fmt.Fprint(hook, helloLine("late"))
	ds := col.waitFor(t, "the hook's hello", func(ds []Delivery) bool { return countKind(ds, Received) == 1 })
	for _, d := range ds {
		if d.Kind == Disconnected && errors.Is(d.Err, errEvicted) {
			t.Errorf("conn %d was evicted within its grace", d.Conn)
		}
	}
}
