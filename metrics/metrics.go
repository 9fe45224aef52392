// Package metrics serves a session's memory as Prometheus metrics on
// /metrics, with github.com/prometheus/client_golang, for dashboards next
// to dcgm-exporter: allocated, reserved and peak gauges per training
// process (host, pid, rank, device), the current step and phase, per-phase
// peaks of the newest step, NVML device and process memory, and the hook's
// drops and the monitor's losses. docs/prometheus.md lists every metric.
//
// An Exporter keeps a store of its own, fed through Put (a feed.WithTap
// tap), so it works the same under the live view, record and run: nothing
// else has to share its store.
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

// Exporter turns the events it is given into Prometheus metrics. Put is
// safe to call from any goroutine; the events are applied to the
// exporter's own store by its Run goroutine (or by a scrape).
type Exporter struct {
	mu      sync.Mutex // guards store and the pending queue
	pending []session.Event
	spare   []session.Event
	dropped uint64 // events not applied because the queue was full
	store   *session.Store
	wake    chan struct{}

	limit    int
	interval time.Duration
	host     string
	reg      *prometheus.Registry
}

// New returns an exporter with an empty store.
func New(opts ...Option) *Exporter {
	e := &Exporter{
		// Metrics need the newest values and the newest steps only: a
		// short raw window and small tables keep the second store small.
		store: session.New(session.WithRawWindow(time.Minute), session.WithMaxSpans(256),
			session.WithMaxSteps(64), session.WithMaxStepPeaks(64)),
		wake:     make(chan struct{}, 1),
		limit:    1 << 18,
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

// Put queues one event. It never blocks: past the queue's limit (the
// applier stopped) an event is counted in vramscope_exporter_dropped_total
// and not applied.
func (e *Exporter) Put(ev session.Event) {
	e.mu.Lock()
	if len(e.pending) >= e.limit {
		e.dropped++
	} else {
		e.pending = append(e.pending, ev)
	}
	full := len(e.pending) >= e.limit/2
	e.mu.Unlock()
	if full {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
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
		case <-e.wake:
		}
		e.mu.Lock()
		e.applyLocked()
		e.mu.Unlock()
	}
}

// applyLocked feeds the queued events to the store; e.mu is held.
func (e *Exporter) applyLocked() {
	batch := e.pending
	e.pending, e.spare = e.spare[:0], batch
	e.store.ApplyAll(batch)
	clear(batch) // drop references to applied messages
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
