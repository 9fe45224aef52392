package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/internal/promtest"
	"github.com/vramscope/vramscope/ipc"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// binary is the vramscope binary under test: $VRAMSCOPE_BIN (set by make),
// else one built once for this package's tests.
func binary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("VRAMSCOPE_BIN"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vs-bin")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "vramscope")
		cmd := exec.Command("go", "build", "-o", built, "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// privateDir is a short (sockets are limited to 108 bytes), 0700 directory.
func privateDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// node is one simulated node: a real `vramscope record --prometheus`
// monitor and the ranks that train beside it.
type node struct {
	name, socket, metrics string
	cmd                   *exec.Cmd
	ranks                 []rankPlan
}

// rankPlan is one training process: its scenario, rank and job.
type rankPlan struct {
	scenario string
	rank     int
	world    int
	job      *ipc.Job
}

func (n *node) start(t *testing.T, bin string) {
	t.Helper()
	dir := privateDir(t)
	n.socket = filepath.Join(dir, "s.sock")
	n.metrics = promtest.FreeAddr(t)
	n.cmd = exec.Command(bin, "record", "-o", filepath.Join(dir, n.name+".jsonl.gz"), "--socket", n.socket, "--prometheus", n.metrics)
	log, err := os.Create(filepath.Join(dir, "monitor.log"))
	if err != nil {
		t.Fatal(err)
	}
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.cmd.Process.Signal(syscall.SIGTERM)
		n.cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("monitor %s:\n%s", n.name, b)
		}
	})
}

// train plays the node's ranks against its monitor, each a real hook
// client of the demo on the monitor's socket, to their goodbye.
func (n *node) train(ctx context.Context, steps int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(n.ranks))
	for i, r := range n.ranks {
		sc, err := demo.Lookup(r.scenario)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = demo.Run(ctx, n.socket, sc, demo.WithSteps(steps), demo.WithSpeed(0),
				demo.WithJob(r.rank, r.world, n.name, r.job))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// waitMetrics waits until the node's /metrics shows every rank's last step.
func (n *node) waitMetrics(ctx context.Context, t *testing.T, lastStep int) {
	t.Helper()
	want := fmt.Sprintf("} %d", lastStep)
	for {
		body, finished := "", 0
		if resp, err := http.Get("http://" + n.metrics + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "vramscope_last_step{") && strings.HasSuffix(line, want) {
				finished++
			}
		}
		if finished == len(n.ranks) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("monitor %s never showed its %d ranks' step %d:\n%s", n.name, len(n.ranks), lastStep, body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// expected is what one rank's messages say, read from the messages the
// demo sends (not through the exporter): its session peak, held memory,
// newest step's peak, newest allocated and largest reserved.
type expected struct {
	host, rank         string
	peak, held, newest float64
	stepPeak           float64
	reserved           float64
	leak               bool
}

func expect(t *testing.T, host string, r rankPlan, steps int) expected {
	t.Helper()
	sc, _ := demo.Lookup(r.scenario)
	msgs := demo.Generate(sc, demo.Config{Steps: steps, Rank: r.rank, WorldSize: r.world, HostName: host, Job: r.job})
	e := expected{host: host, rank: strconv.Itoa(r.rank), leak: r.scenario == "leak"}
	last := steps - 1
	for _, m := range msgs {
		if m.Mem == nil {
			continue
		}
		e.peak = max(e.peak, float64(m.Mem.MaxAllocated), float64(m.Mem.Allocated))
		e.reserved = max(e.reserved, float64(m.Mem.MaxReserved), float64(m.Mem.Reserved))
		e.newest = float64(m.Mem.Allocated)
		// The demo's hook has exact peaks (docs/demo.md): each phase
		// read's max_allocated is the peak since the read before, so the
		// newest step's peak is the largest of its reads (a plain step's
		// one read at its end).
		if m.Type == ipc.TypePhase && m.Step == last {
			e.stepPeak = max(e.stepPeak, float64(m.Mem.MaxAllocated))
			if m.Name == "step" && m.Edge == ipc.EdgeEnd {
				e.held = float64(m.Mem.Allocated)
			}
		}
	}
	return e
}

// TestClusterInRealPrometheus is docs/cluster.md on one machine: three
// nodes, each a real `vramscope record --prometheus` monitor fed by real
// hook clients (the demo's) with their job identity, ranks 0-3 of Slurm
// job 81234 on node-0 and node-1 (rank 3 leaks 12 MiB a step) and a rank
// of job 77 on node-2; Debian's Prometheus scrapes the three with the
// shipped alerting rules loaded. Every panel of the shipped dashboard,
// its variables set to job 81234 and every host and rank, is asked
// through Prometheus's HTTP API and answers the numbers the ranks' own
// messages give; the variables list the job's hosts and ranks; the
// leaking-rank alert is raised for rank 3 alone.
func TestClusterInRealPrometheus(t *testing.T) {
	promtest.Tool(t, "prometheus")
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const steps = 30
	slurm := func(n string) *ipc.Job { return &ipc.Job{ID: "81234", Source: ipc.JobSlurm, Step: "0", Node: n} }
	nodes := []*node{
		{name: "node-0", ranks: []rankPlan{{"steady", 0, 4, slurm("node-0")}, {"steady", 1, 4, slurm("node-0")}}},
		{name: "node-1", ranks: []rankPlan{{"steady", 2, 4, slurm("node-1")}, {"leak", 3, 4, slurm("node-1")}}},
		{name: "node-2", ranks: []rankPlan{{"steady", 0, 2, &ipc.Job{ID: "77", Source: ipc.JobTorchElastic}}}},
	}
	var targets []string
	var want []expected
	for _, n := range nodes {
		n.start(t, bin)
		targets = append(targets, n.metrics)
		if n.name != "node-2" {
			for _, r := range n.ranks {
				want = append(want, expect(t, n.name, r, steps))
			}
		}
	}
	for _, n := range nodes {
		if err := n.train(ctx, steps); err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
	}
	for _, n := range nodes {
		n.waitMetrics(ctx, t, steps-1)
	}
	web := startPrometheus(ctx, t, targets)
	// Every monitor scraped, every rule evaluated once since.
	promtest.Query(ctx, t, web, `count(vramscope_process_info) == 5 and count(ALERTS{alertname="VramscopeRankLeaking"}) == 1`)

	vars := strings.NewReplacer(`$job`, `81234`, `$host`, `.*`, `$rank`, `.*`)
	d := loadDashboard(t)
	answered := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			got := promtest.Query(ctx, t, web, vars.Replace(q.Expr))
			checkPanel(t, p.Title, got, want)
			answered++
		}
	}
	if answered != len(d.Panels) {
		t.Errorf("%d queries answered, %d panels", answered, len(d.Panels))
	}
	hosts := promtest.Query(ctx, t, web, `count by (host) (vramscope_process_info{job_id=~"81234"})`)
	if len(hosts) != 2 {
		t.Errorf("job 81234 runs on %d hosts, want node-0 and node-1: %v", len(hosts), hosts)
	}
	alerts := promtest.Query(ctx, t, web, `ALERTS{alertname="VramscopeRankLeaking"}`)
	if len(alerts) != 1 || alerts[0].Metric["rank"] != "3" || alerts[0].Metric["job_id"] != "81234" || alerts[0].Metric["host"] != "node-1" {
		t.Errorf("leaking-rank alerts %v, want rank 3 of job 81234 on node-1 alone", alerts)
	}
}

// checkPanel compares one panel's answer with the ranks' own numbers.
func checkPanel(t *testing.T, title string, got []promtest.Sample, want []expected) {
	t.Helper()
	byRank := map[string]expected{}
	for _, w := range want {
		byRank[w.rank] = w
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	var needs []float64
	for _, w := range want {
		needs = append(needs, w.peak)
	}
	perRank := func(name string, f func(expected) (float64, bool)) {
		n := 0
		for _, w := range want {
			if _, ok := f(w); ok {
				n++
			}
		}
		if len(got) != n {
			t.Errorf("%s: %d series, want %d: %v", title, len(got), n, got)
		}
		for _, s := range got {
			w, ok := byRank[s.Metric["rank"]]
			v, has := f(w)
			if !ok || !has || s.Metric["host"] != w.host || !near(s.Float(t), v) {
				t.Errorf("%s: rank %s on %s = %v, want %v on %s", title, s.Metric["rank"], s.Metric["host"], s.Float(t), v, w.host)
			}
		}
	}
	switch title {
	case "Peak allocated per rank", "Need per rank":
		perRank(title, func(w expected) (float64, bool) { return w.peak, true })
	case "Held between steps per rank":
		perRank(title, func(w expected) (float64, bool) { return w.held, true })
	case "Headroom per rank":
		perRank(title, func(w expected) (float64, bool) {
			return float64(demo.DeviceTotal-int64(w.reserved)) / float64(demo.DeviceTotal), true
		})
	case "Leak rate per rank":
		perRank(title, func(w expected) (float64, bool) { return float64(demo.LeakPerStep), w.leak })
	case "Leak onset (step)":
		if len(got) != 1 || got[0].Metric["rank"] != "3" || got[0].Float(t) < 0 || got[0].Float(t) > 2 {
			t.Errorf("%s: %v, want rank 3's leak from its first steps", title, got)
		}
	case "Rank imbalance: largest need / median":
		sort.Float64s(needs)
		mid := (needs[len(needs)/2-1] + needs[len(needs)/2]) / 2 // quantile(0.5) of 4 values
		if len(got) != 1 || !near(got[0].Float(t), needs[len(needs)-1]/mid) {
			t.Errorf("%s: %v, want %v", title, got, needs[len(needs)-1]/mid)
		}
	case "Phase peaks of the newest step":
		// Every rank's backward peaks at its newest step's peak (the
		// demo's backward holds the step's peak); its other phases below.
		// A plain step's phases are those of the step it repeats.
		backward := map[string]bool{}
		for _, s := range got {
			w, ph, v := byRank[s.Metric["rank"]], s.Metric["phase"], s.Float(t)
			switch {
			case ph == "backward" && (near(v, w.stepPeak) || w.leak && math.Abs(v-w.stepPeak) <= 0.01*w.stepPeak):
				// A leaking rank's newest step may repeat an earlier
				// one within the hook's noise (1 % of the peak): its
				// phases are that step's, labelled inferred.
				backward[s.Metric["rank"]] = true
			case ph == "backward", v <= 0, v > w.stepPeak:
				t.Errorf("%s: rank %s %s = %v, newest step's peak %v", title, s.Metric["rank"], ph, v, w.stepPeak)
			}
		}
		if len(backward) != len(want) {
			t.Errorf("%s: backward at the step's peak for %d ranks, want %d: %v", title, len(backward), len(want), got)
		}
	case "Allocated over time":
		perRank(title, func(w expected) (float64, bool) { return w.newest, true })
	case "Pattern per rank":
		for _, s := range got {
			want := "steady"
			if byRank[s.Metric["rank"]].leak {
				want = "growth"
			}
			if s.Metric["pattern"] != want || s.Float(t) != 1 {
				t.Errorf("%s: rank %s is %s, want %s", title, s.Metric["rank"], s.Metric["pattern"], want)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d series, want %d", title, len(got), len(want))
		}
	default:
		t.Errorf("panel %q has no expected numbers in this test", title)
	}
}

// startPrometheus runs Debian's prometheus on loopback scraping targets
// every second, with the shipped alerting rules evaluated every second.
func startPrometheus(ctx context.Context, t *testing.T, targets []string) string {
	t.Helper()
	rules, err := filepath.Abs("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(targets)
	return promtest.Start(ctx, t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: vramscope
    static_configs:
      - targets: %s
`, rules, quoted))
}
