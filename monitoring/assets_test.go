package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/vramscope/vramscope/internal/promtest"
	"github.com/vramscope/vramscope/metrics"
)

// targetLabels are the labels Prometheus itself adds to every scraped
// series (and the alert's own, for rules over ALERTS).
var targetLabels = []string{"job", "instance", "__name__"}

// catalog maps each metric the exporter can serve, and Prometheus's own
// up, to its label names: the list every query is checked against,
// derived from the exporter (metrics.Catalog), never written by hand.
func catalog() map[string][]string {
	out := map[string][]string{"up": nil}
	for _, f := range metrics.Catalog() {
		out[f.Name] = f.Labels
	}
	return out
}

// checkQuery fails when q names a metric the exporter does not serve, or a
// label none of its metrics carries.
func checkQuery(t *testing.T, where, q string, cat map[string][]string) {
	t.Helper()
	for _, p := range queryProblems(q, cat) {
		t.Errorf("%s: %s (query %q)", where, p, q)
	}
}

func queryProblems(q string, cat map[string][]string) []string {
	var out []string
	n := namesOf(q)
	if len(n.metrics) == 0 {
		out = append(out, "no metric")
	}
	known := append([]string{}, targetLabels...)
	for _, m := range n.metrics {
		labels, ok := cat[m]
		if !ok {
			out = append(out, "metric "+m+" is not served by the exporter")
		}
		known = append(known, labels...)
	}
	for _, l := range n.labels {
		if !slices.Contains(known, l) {
			out = append(out, "label "+l+" is on none of "+strings.Join(n.metrics, ", "))
		}
	}
	return out
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Schema     int    `json:"schemaVersion"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
			Query      any    `json:"query"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Datasource  map[string]any           `json:"datasource"`
	GridPos     struct{ X, Y, W, H int } `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID   string `json:"refId"`
		Expr    string `json:"expr"`
		Instant bool   `json:"instant"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/vramscope-job.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("the dashboard is not JSON Grafana can import: %v", err)
	}
	return d
}

// TestDashboardIsWellFormed checks the dashboard as Grafana imports it: a
// uid and schema version; the job, host and rank variables, each a
// label_values() query of the exporter's labels, chained (host within job,
// rank within both); every panel a known type with a place on the grid
// that overlaps no other, a unit, the datasource variable, and queries
// that name only metrics the exporter serves and labels those metrics
// carry (metrics.Catalog); the panels the cluster view promises are there.
func TestDashboardIsWellFormed(t *testing.T) {
	d := loadDashboard(t)
	cat := catalog()
	if d.UID == "" || d.Title == "" || d.Schema < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.Schema)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Definition
		if v.Type == "query" {
			if !strings.HasPrefix(v.Definition, "label_values(") || v.AllValue != ".*" {
				t.Errorf("variable %s: %q, allValue %q", v.Name, v.Definition, v.AllValue)
			}
			checkQuery(t, "variable "+v.Name, v.Definition, cat)
		}
	}
	for name, needs := range map[string]string{"job": "job_id)", "host": `job_id=~"$job"`, "rank": `host=~"$host"`} {
		if def, ok := vars[name]; !ok || !strings.Contains(def, needs) {
			t.Errorf("variable %s: %q, want it to contain %s", name, def, needs)
		}
	}
	if _, ok := vars["datasource"]; !ok {
		t.Error("no datasource variable")
	}
	types := map[string]bool{"bargauge": true, "stat": true, "timeseries": true, "table": true, "gauge": true}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	for _, p := range d.Panels {
		where := "panel " + p.Title
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("%s: id %d not unique", where, p.ID)
		}
		ids[p.ID] = true
		if !types[p.Type] || p.Datasource["uid"] != "${datasource}" || p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("%s: type %q, datasource %v, unit %q", where, p.Type, p.Datasource, p.FieldConfig.Defaults.Unit)
		}
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v", where, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("%s overlaps %s at %d,%d", where, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, q := range p.Targets {
			checkQuery(t, where, q.Expr, cat)
			if !strings.Contains(q.Expr, `job_id=~"$job"`) {
				t.Errorf("%s: %q ignores the job variable", where, q.Expr)
			}
		}
	}
	for _, m := range []string{"vramscope_peak_allocated_bytes", "vramscope_step_held_bytes", "vramscope_headroom_bytes",
		"vramscope_growth_bytes_per_step", "vramscope_phase_peak_allocated_bytes", "vramscope_need_allocated_bytes"} {
		found := false
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				found = found || slices.Contains(namesOf(q.Expr).metrics, m)
			}
		}
		if !found {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// TestNamesOfReadsPromQL pins the small PromQL reader the checks above use.
func TestNamesOfReadsPromQL(t *testing.T) {
	n := namesOf(`sort_desc(max by (rank, host) (vramscope_a{job_id=~"$job", kind="leak"}[5m]) / on (uuid) group_left () vramscope_b) > 0.5 and count by (job_id) (label_values(vramscope_c{x!="1"}, rank)) > 1`)
	sort.Strings(n.metrics)
	sort.Strings(n.labels)
	if want := []string{"vramscope_a", "vramscope_b", "vramscope_c"}; !slices.Equal(n.metrics, want) {
		t.Errorf("metrics %v, want %v", n.metrics, want)
	}
	if want := []string{"host", "job_id", "job_id", "kind", "rank", "rank", "uuid", "x"}; !slices.Equal(n.labels, want) {
		t.Errorf("labels %v, want %v", n.labels, want)
	}
	errs := append(queryProblems(`vramscope_peak_allocated_bytes{nope="1"}`, catalog()),
		queryProblems(`max by (rank) (vramscope_invented_bytes)`, catalog())...)
	if len(errs) != 3 {
		t.Errorf("a made-up label and a made-up metric: %v", errs)
	}
	if errs := queryProblems(`max by (rank, job_id) (vramscope_peak_allocated_bytes{instance="x"})`, catalog()); errs != nil {
		t.Errorf("a good query: %v", errs)
	}
}

type rulesFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
			For   string `yaml:"for"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRules loads the rules with promtool check rules, runs their
// unit tests (prometheus/alerts_test.yml: each alert fires on its case and
// stays silent on its control) and the join with dcgm-exporter's series on
// UUID and Hostname (dcgm_join_test.yml) with promtool test rules, and
// checks every
// rule's expression against the exporter's metrics; the four alerts the
// cluster view promises are there.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf rulesFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			checkQuery(t, "alert "+r.Alert, r.Expr, catalog())
		}
	}
	for _, want := range []string{"VramscopeRankLeaking", "VramscopeRankNearDeviceLimit", "VramscopeRanksImbalanced", "VramscopeMonitorDown", "VramscopeMonitorMissingData"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s", want)
		}
	}
	promtool := promtest.Tool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}, {"test", "rules", "dcgm_join_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestScrapeConfigs checks the static and Slurm (file-based discovery)
// configurations with promtool check config; the Slurm one reads the
// directory the Slurm script writes its targets to by default. Debian's Prometheus is built without Kubernetes discovery, so
// the Kubernetes one is checked for its shape: pod discovery kept to the
// sidecar's port named "vramscope", the port kubernetes-job.yaml opens.
func TestScrapeConfigs(t *testing.T) {
	for _, f := range []string{"prometheus-static.yml", "prometheus-kubernetes.yml", "prometheus-slurm.yml"} {
		b, err := os.ReadFile(filepath.Join("prometheus", f))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			RuleFiles     []string         `yaml:"rule_files"`
			ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
		}
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Contains(c.RuleFiles, "alerts.yml") || len(c.ScrapeConfigs) != 1 || c.ScrapeConfigs[0]["job_name"] != "vramscope" {
			t.Errorf("%s: rule files %v, scrape configs %v (want job vramscope, which VramscopeMonitorDown selects)", f, c.RuleFiles, c.ScrapeConfigs)
		}
		if f == "prometheus-slurm.yml" {
			script, err := os.ReadFile("deploy/slurm-job.sh")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"/shared/prometheus/targets/*.json"`) || !strings.Contains(string(script), "VRAMSCOPE_TARGETS:-/shared/prometheus/targets}") {
				t.Errorf("the Slurm config and script disagree on the targets directory")
			}
		}
		if f == "prometheus-kubernetes.yml" {
			s := string(b)
			for _, want := range []string{"role: pod", "__meta_kubernetes_pod_container_port_name", "regex: vramscope", "action: keep"} {
				if !strings.Contains(s, want) {
					t.Errorf("%s lacks %q", f, want)
				}
			}
		}
	}
	promtool := promtest.Tool(t, "promtool")
	for _, f := range []string{"prometheus-static.yml", "prometheus-slurm.yml"} {
		cmd := exec.Command(promtool, "check", "config", f)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool check config %s: %v\n%s", f, err, out)
		}
	}
}
