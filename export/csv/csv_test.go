package csv_test

import (
	"bytes"
	stdcsv "encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/export/csv"
)

func writeCSV(t *testing.T, path string) []byte {
	t.Helper()
	store, _, _, err := export.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := csv.Write(&buf, store); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCSVMatchesTheRunsOwnPrints checks the s001 table against the same
// run's torch.cuda prints after each phase (s001_stat_cuda.json): the
// allocator's max_allocated and reserved at each phase's end, to the byte.
// (allocated itself differs by a few hundred bytes after backward: the
// script prints after loss.backward() returns, once the graph is freed;
// the hook's end edge is taken inside it. "loss" is left out: the hook
// ends it when backward begins, inside loss.backward(), after the script's
// print — the known s001 discrepancy in shared/recordings/h100/README.md.)
func TestCSVMatchesTheRunsOwnPrints(t *testing.T) {
	rows, err := stdcsv.NewReader(bytes.NewReader(writeCSV(t, "../../testdata/h100/s001.jsonl.gz"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+6*5 {
		t.Fatalf("%d rows, want a header and 6 steps × 5 phases", len(rows))
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	raw, err := os.ReadFile("../../testdata/h100/s001_stat_cuda.json")
	if err != nil {
		t.Fatal(err)
	}
	var prints []map[string]any
	if err := json.Unmarshal(raw, &prints); err != nil {
		t.Fatal(err)
	}
	matched := 0
	for _, p := range prints {
		step, phase := int(p["step"].(float64)), p["phase"].(string)
		if phase == "loss" {
			continue
		}
		for _, r := range rows[1:] {
			if r[col["step"]] != strconv.Itoa(step) || r[col["phase"]] != phase {
				continue
			}
			matched++
			for _, k := range []string{"max_allocated", "reserved"} {
				want := strconv.FormatInt(int64(p[k].(float64)), 10)
				if got := r[col[k+"_end"]]; got != want {
					t.Errorf("step %d %s: %s_end %s, the run printed %s", step, phase, k, got, want)
				}
			}
		}
	}
	if matched != 24 {
		t.Fatalf("matched %d of the run's prints, want 6 steps × 4 phases", matched)
	}
}

// TestCSVReadByPandas reads every real recording's table with
// pandas.read_csv and no options, as a user would, and checks the dtypes
// it infers: integers for bytes that are always known, floats (with NaN)
// where a value can be unknown, floats for seconds, bools for flags.
// Skipped without pandas unless VRAMSCOPE_REQUIRE_PANDAS=1 (CI installs
// python3-pandas).
func TestCSVReadByPandas(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import pandas").Run(); err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_PANDAS") == "1" {
			t.Fatalf("%s has no pandas: %v", py, err)
		}
		t.Skipf("SKIPPED: %s has no pandas (apt-get install python3-pandas)", py)
	}
	dir := t.TempDir()
	args := []string{"-c", pandasCheck, joinCols()}
	for _, src := range []string{"s001", "live", "clients", "oom"} {
		path := filepath.Join(dir, src+".csv")
		if err := os.WriteFile(path, writeCSV(t, "../../testdata/h100/"+src+".jsonl.gz"), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	// One interpreter for every file: importing pandas costs seconds on a
	// loaded machine.
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pandas: %v\n%s", err, out)
	}
	t.Logf("rows and peak allocated per file:\n%s", bytes.TrimSpace(out))
}

// pandasCheck reads each CSV with pandas.read_csv and no options.
const pandasCheck = `
import sys, pandas
cols = sys.argv[1].split(",")
for path in sys.argv[2:]:
    df = pandas.read_csv(path)
    assert list(df.columns) == cols, (path, list(df.columns))
    assert len(df) > 0, path
    for c in ["pid", "step", "count", "micro"]:
        assert df[c].dtype.kind == "i", (path, c, df[c].dtype)
    for c in ["start_s", "end_s", "duration_s"]:
        assert df[c].dtype.kind == "f", (path, c, df[c].dtype)
        assert (df[c] >= 0).all(), (path, c)
    for c in ["user", "peak_exact"]:
        assert df[c].dtype.kind == "b", (path, c, df[c].dtype)
    assert (df["end_s"] >= df["start_s"]).all(), path
    assert df["peak_allocated"].max() > 0, path
    print(path.rsplit("/", 1)[-1], len(df), int(df["peak_allocated"].max()))
`

func joinCols() string {
	var b bytes.Buffer
	for i, c := range csv.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c)
	}
	return b.String()
}

// TestCSVDurationIsTheMicroStepsSum: a phase's duration_s with gradient
// accumulation (testdata/recordings/cpu_accum4.py, four micro-steps) is
// its spans' own durations summed: a step's phases add up to no more than
// the step, where end_s − start_s of forward, loss and backward overlap.
func TestCSVDurationIsTheMicroStepsSum(t *testing.T) {
	rows, err := stdcsv.NewReader(bytes.NewReader(writeCSV(t, "../../testdata/recordings/cpu_accum4.jsonl.gz"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	num := func(r []string, c string) float64 {
		v, err := strconv.ParseFloat(r[col[c]], 64)
		if err != nil {
			t.Fatalf("%s %q: %v", c, r[col[c]], err)
		}
		return v
	}
	sum, first, last := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, r := range rows[1:] {
		st := r[col["step"]]
		if _, ok := first[st]; !ok {
			first[st] = num(r, "start_s")
		}
		last[st] = max(last[st], num(r, "end_s"))
		sum[st] += num(r, "duration_s")
		if r[col["device"]] != "cpu" {
			t.Fatalf("device %q on a CPU run, want cpu", r[col["device"]])
		}
		if r[col["phase"]] == "forward" && (r[col["count"]] != "4" || num(r, "duration_s") >= num(r, "end_s")-num(r, "start_s")) {
			t.Errorf("step %s forward: count %s, duration %s of a span %s–%s", st, r[col["count"]], r[col["duration_s"]], r[col["start_s"]], r[col["end_s"]])
		}
	}
	if len(sum) != 6 {
		t.Fatalf("%d steps, want 6", len(sum))
	}
	for st, s := range sum {
		if step := last[st] - first[st]; s > step+2e-6 {
			t.Errorf("step %s: phases %.6f s, more than the step's %.6f s", st, s, step)
		}
	}
}
