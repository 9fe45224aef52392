// Package promtest runs a real Prometheus server (Debian's package) for
// tests and asks it PromQL through its HTTP API: the one copy of that
// harness, for the exporter's tests and the shipped dashboard's.
package promtest

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
)

// Tool finds a Prometheus binary (prometheus, promtool). Without it the
// test is skipped, unless VRAMSCOPE_REQUIRE_PROMETHEUS=1 (CI installs
// Debian's prometheus package, which carries both).
func Tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_PROMETHEUS") == "1" {
			t.Fatalf("no %s binary (apt-get install prometheus)", name)
		}
		t.Skipf("SKIPPED: no %s binary (apt-get install prometheus)", name)
	}
	return p
}

// FreeAddr is a loopback host:port nothing listens on right now.
func FreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start runs prometheus with config (the YAML of prometheus.yml) on a
// free loopback port until the test ends, and returns its address. Its
// log is shown when the test fails.
func Start(ctx context.Context, t *testing.T, config string) string {
	t.Helper()
	bin := Tool(t, "prometheus")
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := safefs.WriteFile(conf, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	web := FreeAddr(t)
	cmd := exec.CommandContext(ctx, bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	logf, err := safefs.OpenFile(filepath.Join(dir, "prometheus.log"), safefs.Exclusive, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return web
}

// Sample is one element of an instant query's vector.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Float is the sample's value.
func (s Sample) Float(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Errorf("value %v: %v", s.Value[1], err)
	}
	return v
}

// Query asks the Prometheus at web an instant query until it answers a
// non-empty vector (the first scrapes and rule evaluations take seconds),
// failing the test at ctx's deadline or on a query Prometheus refuses.
func Query(ctx context.Context, t *testing.T, web, query string) []Sample {
	t.Helper()
	u := "http://" + web + "/api/v1/query?query=" + url.QueryEscape(query)
	for {
		var body struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []Sample `json:"result"`
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
