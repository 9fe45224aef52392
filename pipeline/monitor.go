package pipeline

import (
	"context"
	"time"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
)

// Monitor is the pipeline of a monitor (the live view, record, run): the
// socket server and the NVML poller, both feeding one feed. The sinks
// (store, recorder, Prometheus tap, TUI) read the feed.
type Monitor struct {
	// Server is the socket server the hooks connect to.
	Server *ipc.Server
	// Sampler is the NVML sampler, a null one when NVML is missing.
	Sampler probe.Sampler

	served, polled <-chan struct{}
}

// StartMonitor starts the sources of a monitor into f until ctx is done:
// the server srv (already listening) and NVML, opened here and sampled at
// the intervals dev and proc. Stop stops them.
func StartMonitor(ctx context.Context, srv *ipc.Server, f *feed.Feed, logf func(string, ...any), dev, proc time.Duration) *Monitor {
	m := &Monitor{Server: srv, Sampler: OpenNVML()}
	m.polled = Poll(ctx, m.Sampler, f, logf, dev, proc)
	m.served = Serve(ctx, srv, f, logf)
	return m
}

// Stop closes the server and waits for both sources to stop (ctx's
// cancellation stops the poller). It does not close the sampler: Close
// does, when nothing reads its status any more.
func (m *Monitor) Stop() {
	m.Server.Close()
	<-m.served
	<-m.polled
}

// Close closes the NVML sampler.
func (m *Monitor) Close() error { return m.Sampler.Close() }
