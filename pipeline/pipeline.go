// Package pipeline starts and stops the parts a monitoring session is made
// of. A session is sources feeding one feed.Feed, and sinks reading it:
//
//	sources: the socket server (Serve), the NVML poller (Poll), the demo's
//	         clients (package demo), a recording (record.OpenReplay, ReadAll)
//	feed:    feed.Feed, which also records (Recorder)
//	sinks:   the store (Drain, or the TUI's loop), the recorder, the
//	         Prometheus tap (package metrics) and the TUI
//
// Each start function returns a channel closed when its goroutine has
// stopped, so a command stops everything in one place: cancel the context,
// then wait on the channels.
package pipeline

import (
	"context"
	"os"
	"time"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/probe/nvmlprobe"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// OpenNVML opens the real NVML sampler, or a null one that says why not.
func OpenNVML() probe.Sampler {
	return probe.Open(func() (probe.Sampler, error) { return nvmlprobe.New() })
}

// Poll samples NVML into the feed until ctx is done, and returns a channel
// closed when it has stopped. A null sampler (no NVML) is not polled at all.
func Poll(ctx context.Context, s probe.Sampler, f *feed.Feed, logf func(string, ...any), dev, proc time.Duration) <-chan struct{} {
	if _, null := probe.IsNull(s); null {
		done := make(chan struct{})
		close(done)
		return done
	}
	p := probe.NewPoller(s, probe.WithDeviceInterval(dev), probe.WithProcessInterval(proc))
	for _, n := range p.Notes() {
		logf("%s", n)
	}
	return p.Start(ctx, f.Samples)
}

// Recorder returns the feed's way of opening a recording with a header
// that says where the session came from.
func Recorder(tool, source string) feed.Opener {
	return func(path, begins string) (feed.Writer, error) {
		host, _ := os.Hostname()
		return record.Create(path, record.Header{
			Tool:   tool,
			Host:   host,
			Argv:   os.Args,
			Source: source,
			Begins: begins,
		})
	}
}

// Serve runs the socket server until ctx is done and returns a channel
// closed when it has stopped.
func Serve(ctx context.Context, srv *ipc.Server, f *feed.Feed, logf func(string, ...any)) <-chan struct{} {
	return ServeTo(ctx, srv, f.Deliver, logf)
}

// ServeTo is Serve with its own delivery callback.
func ServeTo(ctx context.Context, srv *ipc.Server, deliver func(ipc.Delivery), logf func(string, ...any)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, deliver); err != nil && ctx.Err() == nil {
			logf("socket server stopped: %v", err)
		}
	}()
	return done
}

// Consume is a headless command's loop: it applies the feed's events to s
// until ctx is done, waiting at most every for a batch, and after each
// wait asks keepOn (when not nil) whether to go on, so that a command can
// stop on what it watches (a failed recording, a finished demo) without an
// event to wake it.
func Consume(ctx context.Context, f *feed.Feed, s *session.Store, every time.Duration, keepOn func() bool) {
	for ctx.Err() == nil {
		wait, cancel := context.WithTimeout(ctx, every)
		evs, err := f.Next(wait)
		cancel()
		if err == nil {
			s.ApplyAll(evs)
		}
		if keepOn != nil && !keepOn() {
			return
		}
	}
}

// Drain applies what is still pending in the feed, waiting at most d for
// more to arrive.
func Drain(f *feed.Feed, s *session.Store, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	Consume(ctx, f, s, d, nil)
}
