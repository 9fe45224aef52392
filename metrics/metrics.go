// Package metrics serves a session's memory as Prometheus metrics on
// /metrics, with github.com/prometheus/client_golang, for dashboards next
// to dcgm-exporter: allocated, reserved and peak gauges per training
// process (host, pid, rank, device), the current step and phase, per-phase
// peaks of the newest step, NVML device and process memory, and the hook's
// drops and the monitor's losses. docs/prometheus.md lists every metric.
//
// An Exporter keeps a store of its own, fed from a Source: a feed.Feed of
// its own that the command's feed taps (feed.WithTap), so it works the
// same under the live view, record and run, nothing else has to share its
// store, and its queue is the feed's (bounded, never blocking the tap,
// counting what it skips).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vramscope/vramscope/session"
)

// Source is the queue an Exporter reads its events from: a feed.Feed.
type Source interface {
	// Next returns every pending event, or ctx's error when none is
	// pending and ctx is done.
	Next(ctx context.Context) ([]session.Event, error)
	// Overflow counts the events skipped because the exporter fell behind.
	Overflow() uint64
}

// QueueLimit is how many events may wait for the exporter (its Source's
// limit): a second of a fast run, past which the oldest are skipped.
const QueueLimit = 1 << 18

// Exporter turns the events of its Source into Prometheus metrics. They
// are applied to the exporter's own store by its Run goroutine and by
// each scrape, one at a time: the Source has one consumer.
type Exporter struct {
	mu    sync.Mutex // guards store and the reads of src
	src   Source
	store *session.Store
	now   context.Context // done: a read of src that does not wait

	interval time.Duration
	host     string
	reg      *prometheus.Registry
}

// New returns an exporter with an empty store that reads src.
func New(src Source, opts ...Option) *Exporter {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	e := &Exporter{
		src: src,
		// Metrics need the newest values and the newest steps only: a
		// short raw window and small tables keep the second store small.
		store: session.New(session.WithRawWindow(time.Minute), session.WithMaxSpans(256),
			session.WithMaxSteps(64), session.WithMaxStepPeaks(64)),
		now:      done,
		interval: time.Second,
		reg:      prometheus.NewRegistry(),
	}
	for _, o := range opts {
		o(e)
	}
	e.reg.MustRegister(collector{e})
	e.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return e
}

// Run applies the queued events every interval until ctx is done.
func (e *Exporter) Run(ctx context.Context) {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.mu.Lock()
		e.applyLocked()
		e.mu.Unlock()
	}
}

// applyLocked feeds the queued events to the store; e.mu is held, so the
// batch is applied before the Source reuses its buffer at the next read.
func (e *Exporter) applyLocked() {
	if evs, err := e.src.Next(e.now); err == nil {
		e.store.ApplyAll(evs)
	}
}

// Handler serves the metrics in the Prometheus exposition formats.
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve listens on addr (host:port; ":0" picks a free port) and serves
// /metrics, and applies queued events, until ctx is done. It returns the
// address it listens on once listening, and a channel that gets the
// server's error (nil after a clean stop) and is then closed.
func (e *Exporter) Serve(ctx context.Context, addr string) (string, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("prometheus: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "vramscope: metrics at /metrics")
	})
	capped := newCapListener(ln, httpConnsFor())
	ln = capped
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         capped.connState,
	}
	done := make(chan error, 1)
	go e.Run(ctx)
	go func() {
		defer close(done)
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), done, nil
}
