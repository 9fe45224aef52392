package ipc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// benchStream builds what one realistic client sends: its hello, then n
// messages mixing phase edges and samples taken from the shared fixtures,
// each with the next seq.
func benchStream(b *testing.B, rank, n int) []byte {
	lines := fixtureLines(b, "valid.jsonl")
	hello, phase, sample := lines[0], lines[1], lines[3]
	var buf bytes.Buffer
	buf.Write(bytes.Replace(hello, []byte(`"session":"a1b2c3d4e5f60718"`), []byte(fmt.Sprintf(`"session":"rank%d"`, rank)), 1))
	buf.WriteByte('\n')
	for i := 1; i <= n; i++ {
		tmpl := sample
		if i%2 == 0 {
			tmpl = phase
		}
		seqAt := bytes.Index(tmpl, []byte(`"seq":`))
		end := seqAt + bytes.IndexByte(tmpl[seqAt:], ',')
		buf.Write(tmpl[:seqAt])
		fmt.Fprintf(&buf, `"seq":%d`, i)
		buf.Write(tmpl[end:])
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkIngest8Clients measures how many hook messages per second the
// server decodes with 8 ranks sending as fast as they can, and fails if a
// single message is lost, rejected or reordered.
func BenchmarkIngest8Clients(b *testing.B) {
	const clients = 8
	per := b.N/clients + 1
	streams := make([][]byte, clients)
	for i := range streams {
		streams[i] = benchStream(b, i, per)
	}
	dir, err := os.MkdirTemp("", "vs")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "b.sock")
	s, err := Listen(WithSocketPath(path))
	if err != nil {
		b.Fatal(err)
	}
	// Deliveries of one connection come from one goroutine, in order, so
	// per-connection state needs no lock; conn ids are 1..clients.
	var next [clients + 1]uint64
	var bad, received, ended atomic.Int64
	allEnded := make(chan struct{})
	deliver := func(d Delivery) {
		switch d.Kind {
		case Received:
			if d.Msg.Seq != next[d.Conn] {
				bad.Add(1)
			}
			next[d.Conn] = d.Msg.Seq + 1
			received.Add(1)
		case Rejected:
			bad.Add(1)
		case Disconnected:
			if ended.Add(1) == clients {
				close(allEnded)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, deliver) }()

	conns := make([]net.Conn, clients)
	for i := range conns {
		if conns[i], err = net.Dial("unix", path); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(streams[0]) / (per + 1))) // bytes per message
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func(c net.Conn, p []byte) {
			defer wg.Done()
			defer c.Close()
			for len(p) > 0 { // writes of 32 KiB, like a busy hook's socket buffer
				n := min(len(p), 32<<10)
				if _, err := c.Write(p[:n]); err != nil {
					b.Error(err)
					return
				}
				p = p[n:]
			}
		}(c, streams[i])
	}
	wg.Wait()
	<-allEnded
	b.StopTimer()
	cancel()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	want := int64(clients * (per + 1))
	if got := received.Load(); got != want || bad.Load() != 0 {
		b.Fatalf("received %d of %d messages, %d out of order or rejected", got, want, bad.Load())
	}
	b.ReportMetric(float64(want)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecode measures Decode alone on the fixtures' phase and sample
// lines, the bulk of live traffic.
func BenchmarkDecode(b *testing.B) {
	lines := fixtureLines(b, "valid.jsonl")
	mix := [][]byte{lines[1], lines[3]}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Decode(mix[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}
