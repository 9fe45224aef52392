package cli

import (
	"context"
	"os"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/metrics"
)

// promExport is --prometheus for one command: an exporter tapped into the
// command's feed, so it sees every event the store and the recording see.
// With no address it does nothing. Wiring: build it, pass feedOptions()
// to feed.New, then start(ctx) before the sources run.
type promExport struct {
	addr  string
	queue *feed.Feed // the exporter's own feed, fed by the tap
	exp   *metrics.Exporter
}

func newPromExport(addr string) *promExport {
	p := &promExport{addr: addr}
	if addr != "" {
		host, _ := os.Hostname()
		p.queue = feed.New(feed.WithLimit(metrics.QueueLimit))
		p.exp = metrics.New(p.queue, metrics.WithMonitorHost(host))
	}
	return p
}

// feedOptions are the options that tap the feed (none without an address).
func (p *promExport) feedOptions() []feed.Option {
	if p.exp == nil {
		return nil
	}
	return []feed.Option{feed.WithTap(p.queue.Put)}
}

// start listens and serves until ctx is done. A listen error (port taken,
// bad address) is returned, so the command fails before it starts.
func (p *promExport) start(ctx context.Context, logf func(string, ...any)) error {
	if p.exp == nil {
		return nil
	}
	addr, done, err := p.exp.Serve(ctx, p.addr)
	if err != nil {
		return err
	}
	logf("serving Prometheus metrics on http://%s/metrics", addr)
	go func() {
		if err := <-done; err != nil {
			logf("prometheus: %v", err)
		}
	}()
	return nil
}
