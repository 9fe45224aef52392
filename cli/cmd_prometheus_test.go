package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
)

// TestRecordServesPrometheus runs `record --prometheus` in-process while
// two demo ranks (real hook clients on a real socket) train, and scrapes
// /metrics during the run: both ranks are there, labelled, with their
// allocator figures.
func TestRecordServesPrometheus(t *testing.T) {
	dir, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sock := filepath.Join(dir, "s.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recorded := make(chan error, 1)
	go func() {
		recorded <- runRecord(ctx, recordFlags{out: filepath.Join(dir, "r.jsonl"), socket: sock, prom: addr,
			nvmlEvery: time.Second, procEvery: time.Second}, io.Discard)
	}()
	sc, err := demo.Lookup("steady")
	if err != nil {
		t.Fatal(err)
	}
	// Ten steps per rank at 20× speed: a couple of seconds of training.
	if err := demo.Run(ctx, sock, sc, demo.WithRanks(2), demo.WithSteps(10), demo.WithSpeed(20)); err != nil {
		t.Fatalf("demo: %v", err)
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, `rank="1"`) && strings.Contains(body, "vramscope_last_step") {
			break
		}
	}
	for _, want := range []string{`vramscope_allocated_bytes{`, `rank="0"`, `rank="1"`, `vramscope_step_peak_allocated_bytes{`, `vramscope_hook_dropped_total{`, "vramscope_processes 2"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	cancel()
	if err := <-recorded; err != nil {
		t.Fatalf("record: %v", err)
	}
}
