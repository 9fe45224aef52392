package ipc

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

// Ask writes a request line to a connection that said hello, and refuses
// one that has not, or that is gone; a hook that never reads makes Ask
// give up after AskTimeout instead of waiting.
func TestAskWritesARequestToTheHook(t *testing.T) {
	s, col := serve(t)
	c := dial(t, s)
	col.waitFor(t, "the connection", func(ds []Delivery) bool { return countKind(ds, Connected) == 1 })
	if err := s.Ask(1, Request{V: 1, Type: RequestCensus, ID: 3}); err == nil || !strings.Contains(err.Error(), "no hello") {
		t.Fatalf("ask before hello: %v", err)
	}
	if _, err := c.Write([]byte(helloLine("ask1") + "\n")); err != nil {
		t.Fatal(err)
	}
	ds := col.waitFor(t, "the hello", func(ds []Delivery) bool { return countKind(ds, Received) == 1 })
	conn := ds[len(ds)-1].Conn
	if err := s.Ask(conn, Request{V: 1, Type: RequestCensus, ID: 3, Reason: CensusSuspect}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if line != `{"v":1,"type":"census","id":3,"reason":"suspect"}`+"\n" {
		t.Fatalf("the hook read %q", line)
	}
	if err := s.Ask(conn+100, Request{V: 1, Type: RequestCensus}); err == nil {
		t.Fatal("asked a connection that does not exist")
	}
	// A hook that never reads: the socket buffers fill, and Ask gives up.
	start := time.Now()
	var last error
	for i := 0; i < 100000 && last == nil; i++ {
		last = s.Ask(conn, Request{V: 1, Type: RequestCensus, ID: int64(i)})
	}
	if last == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("asking a hook that never reads: %v after %v", last, time.Since(start))
	}
}

// An ask line (vramscope census) in place of a hello reaches the handler
// with its pid and gets one answer line; a server without a handler
// refuses it as before hello; AskMonitor speaks both ends.
func TestAskMonitorReachesTheHandler(t *testing.T) {
	var pids []int
	s, _ := serve(t, WithAskHandler(func(pid int) error { pids = append(pids, pid); return nil }))
	a, err := AskMonitor(s.Path(), 4242, 5*time.Second)
	if err != nil || !a.OK || !strings.Contains(a.Text, "pid 4242") {
		t.Fatalf("answer %+v, %v", a, err)
	}
	if len(pids) != 1 || pids[0] != 4242 {
		t.Fatalf("handler got %v", pids)
	}
	plain, col := serve(t)
	if _, err := AskMonitor(plain.Path(), 1, time.Second); err == nil {
		t.Fatal("a server without a handler answered")
	}
	col.waitFor(t, "the refusal", func(ds []Delivery) bool { return countKind(ds, Rejected) >= 1 })
}
