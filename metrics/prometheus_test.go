package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/promtest"
	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/record"
)

// The Grafana panel queries docs/prometheus.md suggests; the test asks a
// real Prometheus each one.
const (
	queryPeak     = `max by (host, pid, rank) (vramscope_peak_allocated_bytes)`
	queryPhases   = `max by (phase) (vramscope_phase_peak_allocated_bytes)`
	queryShareDev = `vramscope_peak_allocated_bytes / on (uuid) group_left () vramscope_nvml_device_total_bytes`
)

// TestRealPrometheusScrapesAndAnswers runs Debian's prometheus server on
// loopback, lets it scrape an exporter that holds the real s001 run, and
// asks it PromQL: the session peak comes back as the run's own
// max_memory_allocated, 4518008832 bytes, with its labels; the per-phase
// query has the five phases; the join on uuid with the NVML device total
// works. Bounded: the whole test gives up after 60 s. Skipped without a
// prometheus binary unless VRAMSCOPE_REQUIRE_PROMETHEUS=1 (CI installs
// the apt package).
func TestRealPrometheusScrapesAndAnswers(t *testing.T) {
	promtest.Tool(t, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	q, e := newExporter(metrics.WithMonitorHost("vm"))
	r, err := record.Open("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	feedRecording(t, q, r, nil)
	r.Close()
	target, done, err := e.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	web := promtest.Start(ctx, t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vramscope
    static_configs:
      - targets: [%q]
`, target))

	started := time.Now()
	peak := promtest.Query(ctx, t, web, queryPeak)
	t.Logf("prometheus answered after %v", time.Since(started).Round(time.Millisecond))
	if len(peak) != 1 || peak[0].Value[1] != "4518008832" || peak[0].Metric["pid"] != "618" || peak[0].Metric["host"] != "vm" {
		t.Fatalf("%s = %+v, want one series pid 618 host vm at 4518008832", queryPeak, peak)
	}
	if phases := promtest.Query(ctx, t, web, queryPhases); len(phases) != 5 {
		t.Fatalf("%s: %d series, want the 5 phases: %+v", queryPhases, len(phases), phases)
	}
	share := promtest.Query(ctx, t, web, queryShareDev)
	if len(share) != 1 {
		t.Fatalf("%s: %+v", queryShareDev, share)
	}
	if f := share[0].Float(t); f < 0.04 || f > 0.07 { // 4.21 GiB of an 80 GB H100 (79.6 GiB usable)
		t.Fatalf("peak share of the device %v, want about 0.053", f)
	}
}
