package metrics_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/vramscope/vramscope/metrics"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	return len(ents)
}

// TestIdleConnectionsCannotStarveTheMonitor: --prometheus set only
// ReadHeaderTimeout, so idle keep-alive connections stayed open for good;
// 20,000 of them exhausted the monitor's file descriptors, hooks could not
// connect and /metrics itself timed out (300 were enough at a 256-fd
// limit). Now the server holds at most
// metrics.MaxHTTPConns connections, evicting the oldest idle one for a new
// scrape, and /metrics answers while 400 idle connections knock.
func TestIdleConnectionsCannotStarveTheMonitor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, e := newExporter()
	addr, done, err := e.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	before := openFDs(t)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < 400; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if i%2 == 0 { // half of them after one request, idle in keep-alive
			c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		}
	}
	time.Sleep(300 * time.Millisecond)
	// Each held connection costs this process one descriptor (the client
	// end); the server's ends are what must stay bounded.
	if server := openFDs(t) - before - len(held); server > metrics.MaxHTTPConns+8 {
		t.Errorf("the server holds %d descriptors for 400 idle connections, want at most %d", server, metrics.MaxHTTPConns+8)
	}
	cl := &http.Client{Timeout: 3 * time.Second}
	start := time.Now()
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics behind 400 idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || time.Since(start) > 2*time.Second {
		t.Errorf("/metrics: %s after %v", resp.Status, time.Since(start))
	}
}
