package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// shortDir returns a fresh directory with a short path: sun_path is only
// 108 bytes, too short for t.TempDir() under some test names.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// collector gathers Deliveries and log lines from concurrent goroutines.
type collector struct {
	mu   sync.Mutex
	ds   []Delivery
	logs []string
}

func (c *collector) deliver(d Delivery) {
	c.mu.Lock()
	c.ds = append(c.ds, d)
	c.mu.Unlock()
}

func (c *collector) logf(format string, args ...any) {
	c.mu.Lock()
	c.logs = append(c.logs, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *collector) snapshot() ([]Delivery, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Delivery(nil), c.ds...), append([]string(nil), c.logs...)
}

// waitFor polls until cond holds or fails the test after 10 s.
func (c *collector) waitFor(t *testing.T, what string, cond func([]Delivery) bool) []Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, _ := c.snapshot()
		if cond(ds) {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; have %d deliveries", what, len(ds))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func countKind(ds []Delivery, k Kind) int {
	n := 0
	for _, d := range ds {
		if d.Kind == k {
			n++
		}
	}
	return n
}

// serve starts a server on a fresh short path and stops it at cleanup.
func serve(t *testing.T, opts ...Option) (*Server, *collector) {
	t.Helper()
	col := &collector{}
	path := filepath.Join(shortDir(t), "s.sock")
	s, err := Listen(append([]Option{WithSocketPath(path), WithLogf(col.logf)}, opts...)...)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, col.deliver) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after cancel")
		}
	})
	return s, col
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

func helloLine(session string) string {
	return fmt.Sprintf(`{"v":1,"type":"hello","seq":0,"t":1.5,"session":%q,"pid":42,"clock":{"mono":1.5,"wall":1763794800.25}}`+"\n", session)
}

func sampleLine(seq int) string {
	return fmt.Sprintf(`{"v":1,"type":"sample","seq":%d,"t":%d.25,"mem":{"allocated":%d,"max_allocated":2048,"reserved":4096,"max_reserved":4096}}`+"\n", seq, seq, seq*16)
}

// byConn splits deliveries per connection and names each connection by the
// session of its hello.
func byConn(ds []Delivery) (map[uint64][]Delivery, map[string]uint64) {
	per := map[uint64][]Delivery{}
	names := map[string]uint64{}
	for _, d := range ds {
		per[d.Conn] = append(per[d.Conn], d)
		if d.Kind == Received && d.Msg.Type == TypeHello {
			names[d.Msg.Session] = d.Conn
		}
	}
	return per, names
}

func TestServerBadInputMatrix(t *testing.T) {
	s, col := serve(t, WithRejectReports(100)) // a report for each case's line
	type badCase struct {
		name  string
		input string // sent after the hello unless before is set
		want  string
	}
	cases := []badCase{
		{"garbage", "this is not json\n", "not JSON"},
		{"ten MiB line", strings.Repeat("x", 10<<20) + "\n", "line longer than 65536 bytes"},
		{"before hello", "", "message before hello"},
	}
	for _, c := range invalidCases(t) {
		cases = append(cases, badCase{"fixture " + c.Case, c.Line + "\n", c.Error})
	}

	const goodN = 3000
	goodDone := make(chan error, 1)
	go func() {
		c, err := net.Dial("unix", s.Path())
		if err != nil {
			goodDone <- err
			return
		}
		defer c.Close()
		if _, err := c.Write([]byte(helloLine("good"))); err != nil {
			goodDone <- err
			return
		}
		for i := 1; i <= goodN; i++ {
			if _, err := c.Write([]byte(sampleLine(i))); err != nil {
				goodDone <- err
				return
			}
		}
		goodDone <- nil
	}()

	for i, bc := range cases {
		c := dial(t, s)
		var in string
		if bc.name == "before hello" {
			in = sampleLine(1) + helloLine(fmt.Sprintf("bad%d", i)) + sampleLine(2)
		} else {
			in = helloLine(fmt.Sprintf("bad%d", i)) + bc.input + sampleLine(2)
		}
		if _, err := c.Write([]byte(in)); err != nil {
			t.Fatalf("%s: write: %v", bc.name, err)
		}
		c.Close()
	}
	// A client that disconnects in the middle of a line.
	mid := dial(t, s)
	if _, err := mid.Write([]byte(helloLine("midline") + `{"v":1,"type":"sam`)); err != nil {
		t.Fatal(err)
	}
	mid.Close()

	if err := <-goodDone; err != nil {
		t.Fatalf("good client: %v", err)
	}
	ds := col.waitFor(t, "every connection to end", func(ds []Delivery) bool {
		return countKind(ds, Disconnected) == len(cases)+2
	})
	per, names := byConn(ds)
	_, logs := col.snapshot()

	good := per[names["good"]]
	if len(good) != goodN+3 {
		t.Fatalf("good client: %d deliveries, want %d", len(good), goodN+3)
	}
	for i, d := range good[1 : len(good)-1] {
		if d.Kind != Received || d.Msg.Seq != uint64(i) {
			t.Fatalf("good client delivery %d: kind %v msg %+v err %v; want seq %d", i, d.Kind, d.Msg, d.Err, i)
		}
	}

	for i, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			id, ok := names[fmt.Sprintf("bad%d", i)]
			if !ok {
				t.Fatalf("no hello seen")
			}
			checkBad(t, per[id], logs, id, bc.want, bc.name == "before hello")
		})
	}
	// A line cut short by the end of its connection is what a hook's send
	// that timed out leaves (a monitor stopped for a while): the end of the
	// connection says so, and it is no bad message of the peer's.
	t.Run("disconnect mid-line", func(t *testing.T) {
		id := names["midline"]
		d := per[id]
		kinds := []Kind{Connected, Received, Disconnected}
		if len(d) != len(kinds) {
			t.Fatalf("got %d deliveries (%v), want %v", len(d), d, kinds)
		}
		for i, k := range kinds {
			if d[i].Kind != k {
				t.Errorf("delivery %d is %v, want %v", i, d[i].Kind, k)
			}
		}
		if d[2].Err == nil || !strings.Contains(d[2].Err.Error(), "mid-line") {
			t.Errorf("the connection's end says %v, want the line cut short", d[2].Err)
		}
	})
}

// checkBad asserts that one connection produced exactly one rejection with
// the wanted reason, exactly one log line for it, and that the valid lines
// around it still got through.
func checkBad(t *testing.T, d []Delivery, logs []string, id uint64, want string, beforeHello bool) {
	t.Helper()
	var kinds []Kind
	var rejected []Delivery
	var seqs []uint64
	for _, x := range d {
		kinds = append(kinds, x.Kind)
		switch x.Kind {
		case Rejected:
			rejected = append(rejected, x)
		case Received:
			seqs = append(seqs, x.Msg.Seq)
		}
	}
	if kinds[0] != Connected || kinds[len(kinds)-1] != Disconnected {
		t.Errorf("kinds %v: want Connected first and Disconnected last", kinds)
	}
	if len(rejected) != 1 {
		t.Fatalf("%d rejections, want 1: %v", len(rejected), kinds)
	}
	msg := rejected[0].Err.Error()
	if !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
		t.Errorf("rejection %q: want one line containing %q", msg, want)
	}
	if fmt.Sprint(seqs) != "[0 2]" {
		t.Errorf("accepted seqs %v, want [0 2] (the hello and the line after the bad one)", seqs)
	}
	if beforeHello && d[1].Kind != Rejected {
		t.Errorf("the message before hello was not the one rejected")
	}
	prefix := fmt.Sprintf("conn %d: ", id)
	n := 0
	for _, l := range logs {
		if strings.HasPrefix(l, prefix) {
			n++
			if !strings.Contains(l, want) || strings.Contains(l, "\n") {
				t.Errorf("log line %q: want one line containing %q", l, want)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d log lines for conn %d, want 1", n, id)
	}
}

func TestServerManyClients(t *testing.T) {
	s, col := serve(t)
	const clients, perClient = 32, 400
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("unix", s.Path())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			var b bytes.Buffer
			b.WriteString(helloLine(fmt.Sprintf("rank%d", i)))
			for j := 1; j <= perClient; j++ {
				b.WriteString(sampleLine(j))
			}
			// Odd-sized writes split lines across reads.
			for p := b.Bytes(); len(p) > 0; {
				n := min(len(p), 777+i)
				if _, err := c.Write(p[:n]); err != nil {
					errs <- err
					return
				}
				p = p[n:]
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("client: %v", err)
	}
	ds := col.waitFor(t, "all clients to end", func(ds []Delivery) bool {
		return countKind(ds, Disconnected) == clients
	})
	per, names := byConn(ds)
	if len(names) != clients {
		t.Fatalf("%d hellos, want %d", len(names), clients)
	}
	for id := uint64(1); id <= clients; id++ {
		d := per[id]
		if len(d) != perClient+3 {
			t.Fatalf("conn %d: %d deliveries, want %d", id, len(d), perClient+3)
		}
		for j, x := range d[1 : len(d)-1] {
			if x.Kind != Received || x.Msg.Seq != uint64(j) {
				t.Fatalf("conn %d delivery %d: %v seq %v err %v", id, j, x.Kind, x.Msg, x.Err)
			}
		}
	}
	if _, ok := per[clients+1]; ok {
		t.Errorf("conn ids go past the number of clients")
	}
}

func TestServerMaxConns(t *testing.T) {
	s, col := serve(t, WithMaxConns(2))
	a, b := dial(t, s), dial(t, s)
	defer a.Close()
	defer b.Close()
	// Both say hello: a full server of hooks refuses the next connection.
	for i, c := range []net.Conn{a, b} {
		if _, err := c.Write([]byte(helloLine(fmt.Sprint("h", i)))); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "two hellos", func(ds []Delivery) bool { return countKind(ds, Received) == 2 })
	c := dial(t, s)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("third connection was not closed: %v", err)
	}
	_, logs := col.snapshot()
	if len(logs) != 1 || !strings.Contains(logs[0], "already 2 connections open") {
		t.Errorf("logs %q: want one line about the limit", logs)
	}
	// The first two still work.
	if _, err := a.Write([]byte(sampleLine(1))); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "a sample on a kept connection", func(ds []Delivery) bool { return countKind(ds, Received) == 3 })
}

func TestServeCancelEndsEverything(t *testing.T) {
	col := &collector{}
	path := filepath.Join(shortDir(t), "s.sock")
	s, err := Listen(WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, col.deliver) }()
	c := dial(t, s)
	defer c.Close()
	c.Write([]byte(helloLine("x")))
	col.waitFor(t, "hello", func(ds []Delivery) bool { return countKind(ds, Received) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	ds, _ := col.snapshot()
	if last := ds[len(ds)-1]; last.Kind != Disconnected || last.Err != nil {
		t.Errorf("last delivery %v err %v, want a clean Disconnected", last.Kind, last.Err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left after Serve returned: %v", err)
	}
	if err := s.Serve(context.Background(), col.deliver); err == nil {
		t.Errorf("second Serve succeeded")
	}
}

func TestServerClock(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, col := serve(t, WithClock(func() time.Time { return at }))
	c := dial(t, s)
	c.Write([]byte(helloLine("x")))
	c.Close()
	ds := col.waitFor(t, "disconnect", func(ds []Delivery) bool { return countKind(ds, Disconnected) == 1 })
	for _, d := range ds {
		if !d.At.Equal(at) {
			t.Errorf("%v delivery At %v, want %v", d.Kind, d.At, at)
		}
	}
}
