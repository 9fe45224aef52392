package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_PROMETHEUS") == "1" {
			t.Fatal("no prometheus binary (apt-get install prometheus)")
		}
		t.Skip("SKIPPED: no prometheus binary (apt-get install prometheus)")
	}
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

	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vramscope
    static_configs:
      - targets: [%q]
`, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	web := freePort(t)
	cmd := exec.CommandContext(ctx, bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", log)
		}
	}()

	started := time.Now()
	peak := waitQuery(ctx, t, web, queryPeak)
	t.Logf("prometheus answered after %v", time.Since(started).Round(time.Millisecond))
	if len(peak) != 1 || peak[0].Value[1] != "4518008832" || peak[0].Metric["pid"] != "618" || peak[0].Metric["host"] != "vm" {
		t.Fatalf("%s = %+v, want one series pid 618 host vm at 4518008832", queryPeak, peak)
	}
	if phases := waitQuery(ctx, t, web, queryPhases); len(phases) != 5 {
		t.Fatalf("%s: %d series, want the 5 phases: %+v", queryPhases, len(phases), phases)
	}
	share := waitQuery(ctx, t, web, queryShareDev)
	if len(share) != 1 {
		t.Fatalf("%s: %+v", queryShareDev, share)
	}
	var f float64
	fmt.Sscan(share[0].Value[1].(string), &f)
	if f < 0.04 || f > 0.07 { // 4.21 GiB of an 80 GB H100 (79.6 GiB usable)
		t.Fatalf("peak share of the device %v, want about 0.053", f)
	}
}

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// waitQuery asks Prometheus's HTTP API an instant query until it returns
// a non-empty vector (the first scrapes take a second or two).
func waitQuery(ctx context.Context, t *testing.T, web, query string) []sample {
	t.Helper()
	u := "http://" + web + "/api/v1/query?query=" + url.QueryEscape(query)
	for {
		var body struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				ResultType string   `json:"resultType"`
				Result     []sample `json:"result"`
			} `json:"data"`
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && body.Status != "success" {
				t.Fatalf("%s: %s", query, body.Error)
			}
			if err == nil && len(body.Data.Result) > 0 {
				return body.Data.Result
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no answer before the deadline (last error %v)", query, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
