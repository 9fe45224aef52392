package ipc

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestBurstOfShortHooksLosesNoSession: 2,000 hooks ran one after another,
// 8 in flight, each with hello, one step and goodbye; the clients saw
// success, but 343 sessions never reached the recording, refused as
// "already 256 connections open" while only a few were: connections whose
// peer had gone still held their slots while their
// buffered lines waited to be decoded. A connection whose peer has hung up
// no longer counts against the limit, and a refusal is delivered (Refused)
// so it can be counted. Here the consumer is slow (2 ms a line) and the
// cap is 8, so the hooks' lines queue as they did at 256.
func TestBurstOfShortHooksLosesNoSession(t *testing.T) {
	var mu sync.Mutex
	hellos, refused := map[string]bool{}, 0
	deliver := func(d Delivery) {
		switch {
		case d.Kind == Received && d.Msg.Type == TypeHello:
			mu.Lock()
			hellos[d.Msg.Session] = true
			mu.Unlock()
		case d.Kind == Disconnected && d.Conn == 0:
			mu.Lock()
			refused++
			mu.Unlock()
		}
		if d.Kind == Received {
			time.Sleep(2 * time.Millisecond)
		}
	}
	path := filepath.Join(shortDir(t), "s.sock")
	s, err := Listen(WithSocketPath(path), WithMaxConns(8))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, deliver) }()
	defer func() { cancel(); <-done }()

	const hooks, inFlight = 200, 4
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i := 0; i < hooks; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Errorf("hook %d: dial: %v", i, err)
				return
			}
			session := fmt.Sprintf("h%04d", i)
			fmt.Fprint(c, helloLine(session)+sampleLine(1)+sampleLine(2)+
				`{"v":1,"type":"goodbye","seq":3,"t":3.5,"reason":"exit"}`+"\n")
			c.Close()
		}(i)
	}
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n, r := len(hellos), refused
		mu.Unlock()
		if n+r >= hooks || time.Now().After(deadline) {
			if n != hooks || r != 0 {
				t.Fatalf("%d of %d sessions reached the consumer, %d connections refused", n, hooks, r)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
