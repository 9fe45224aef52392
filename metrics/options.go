package metrics

import "time"

// Option configures an Exporter.
type Option func(*Exporter)

// WithInterval sets how often Run applies the queued events to the store
// (default 1 s; a scrape always applies them first).
func WithInterval(d time.Duration) Option {
	return func(e *Exporter) {
		if d > 0 {
			e.interval = d
		}
	}
}

// WithMonitorHost sets the host label of the NVML device metrics (the
// monitor's host name; default none).
func WithMonitorHost(host string) Option { return func(e *Exporter) { e.host = host } }
