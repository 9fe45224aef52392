package e2e

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The headless commands, run as the real binary.

type reportJSON struct {
	Schema    string `json:"schema"`
	Processes []struct {
		PID   int `json:"pid"`
		Steps []struct {
			Step   int `json:"step"`
			Phases []struct {
				Phase           string `json:"phase"`
				AllocatedEnd    *int64 `json:"allocated_end"`
				MaxAllocatedEnd *int64 `json:"max_allocated_end"`
				ReservedEnd     *int64 `json:"reserved_end"`
				PeakAllocated   *int64 `json:"peak_allocated"`
				NVMLPeak        *int64 `json:"nvml_peak"`
			} `json:"phases"`
		} `json:"steps"`
	} `json:"processes"`
}

func runBin(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("vramscope %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, o.String(), e.String())
	}
	return o.String(), e.String()
}

func TestDemoHeadlessRecordReportReproducesSeed(t *testing.T) {
	bin := binary(t)
	for _, name := range []string{"run.jsonl", "run.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name)
			text, stderr := runBin(t, bin, "demo", "--headless", "--steps", "4", "-o", out)
			if !strings.Contains(stderr, "1 client,") || !strings.Contains(stderr, "0 lost") {
				t.Errorf("summary line: %s", stderr)
			}
			if !strings.Contains(text, "warmup") {
				t.Errorf("text report lacks the warmup diagnosis:\n%s", text)
			}
			js, _ := runBin(t, bin, "report", "--json", out)
			var rep reportJSON
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatalf("report --json: %v\n%s", err, js)
			}
			if rep.Schema != "vramscope.report/v1" || len(rep.Processes) != 1 {
				t.Fatalf("schema %q, %d processes", rep.Schema, len(rep.Processes))
			}
			// The seed measurement as an exact-peaks hook reads it (MiB:
			// allocated / max allocated since the read before / reserved at
			// the end of each phase): steps 0-2 read every phase, step 3 is
			// plain, read once at its step end (-1: no read).
			seed := [][][3]int64{
				{{281, 281, 284}, {2108, 2154, 2178}, {2566, 2566, 2635}, {1020, 3482, 3551}, {1581, 1581, 3551}},
				{{1581, 1581, 3551}, {2955, 3001, 3552}, {3413, 3413, 3552}, {1581, 4329, 4468}, {1581, 1581, 4468}},
				{{1581, 1581, 4468}, {2955, 3001, 4468}, {3413, 3413, 4468}, {1581, 4329, 4468}, {1581, 1581, 4468}},
				{{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}, {1581, 4329, 4468}},
			}
			order := []string{"zero_grad", "forward", "loss", "backward", "step"}
			steps := rep.Processes[0].Steps
			if len(steps) != 4 {
				t.Fatalf("%d steps in the report", len(steps))
			}
			for i, st := range steps {
				if st.Step != i || len(st.Phases) != 5 {
					t.Fatalf("step %d: index %d, %d phases", i, st.Step, len(st.Phases))
				}
				for j, ph := range st.Phases {
					want := seed[i][j]
					if ph.Phase != order[j] {
						t.Errorf("step %d phase %d is %s, want %s", i, j, ph.Phase, order[j])
					}
					got := [3]int64{deref(ph.AllocatedEnd), deref(ph.MaxAllocatedEnd), deref(ph.ReservedEnd)}
					for k := range got {
						if want[k] > 0 {
							want[k] *= 1 << 20
						}
					}
					if got != want {
						t.Errorf("step %d %s = %v, want %v", i, ph.Phase, got, want)
					}
					// The simulated device follows the hook's reads: before
					// the first (zero_grad's end) it has nothing to show.
					if ph.NVMLPeak == nil && (i > 0 || j > 0) {
						t.Errorf("step %d %s: no NVML peak from the simulated device", i, ph.Phase)
					}
				}
			}
		})
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

func TestRecordRefusesASocketInUse(t *testing.T) {
	bin := binary(t)
	dir, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(bin, "record", "-o", filepath.Join(dir, "r.jsonl"), "--socket", sock, "--duration", "2s")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("record on a live socket succeeded:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "another vramscope is listening on "+sock) {
		t.Fatalf("want one clear line, got:\n%s", out)
	}
}

func TestRecordDurationWritesAFileEvenWithNoClient(t *testing.T) {
	bin := binary(t)
	dir, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "r.jsonl")
	start := time.Now()
	_, stderr := runBin(t, bin, "record", "-o", out, "--socket", filepath.Join(dir, "d", "s.sock"), "--duration", "300ms")
	if time.Since(start) > 5*time.Second {
		t.Errorf("record --duration 300ms took %v", time.Since(start))
	}
	if !strings.Contains(stderr, "0 clients") || !strings.Contains(stderr, "NVML") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
	runBin(t, bin, "report", out) // an empty recording still reports
}

func TestReportOfMissingAndForeignFilesIsOneLine(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(bad, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing.jsonl"), bad, "testdata/recordings/future.jsonl"} {
		out, err := exec.Command(bin, "report", path).CombinedOutput()
		if err == nil {
			t.Errorf("report %s succeeded:\n%s", path, out)
			continue
		}
		if n := strings.Count(strings.TrimSpace(string(out)), "\n"); n != 0 || !strings.HasPrefix(string(out), "vramscope: ") {
			t.Errorf("report %s: want one line starting with 'vramscope: ', got:\n%s", path, out)
		}
	}
}

func TestDevicesWithoutNVMLExitsZero(t *testing.T) {
	bin := binary(t)
	out, _ := runBin(t, bin, "devices")
	if strings.HasPrefix(out, "NVML unavailable: ") {
		if strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "a CPU run through its host memory") {
			t.Errorf("want one line that also says CPU runs are watched:\n%s", out)
		}
		return
	}
	if !strings.Contains(out, "driver") { // a GPU machine lists its devices
		t.Errorf("devices output:\n%s", out)
	}
}

// go-nvml needs cgo; a build without it must still work, and say why NVML
// is missing.
func TestBuildWithoutCgoDegrades(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program again")
	}
	out := filepath.Join(t.TempDir(), "vramscope-nocgo")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, b)
	}
	got, _ := runBin(t, out, "devices")
	if !strings.Contains(got, "NVML unavailable: this vramscope was built without cgo") {
		t.Fatalf("devices without cgo: %q", got)
	}
	if v, _ := runBin(t, out, "version"); !strings.Contains(v, "\nnvml: not built in (CGO_ENABLED=0 build)") {
		t.Errorf("version without cgo: %q", v)
	}
}

// A recording with no memory data (a CPU run) drew an
// empty chart and exited 0. The command fails with one line and writes no
// file.
func TestPlotWithoutMemoryDataExitsNonZero(t *testing.T) {
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "cpu.svg")
	msg, err := exec.Command(bin, "plot", "testdata/recordings/cpu_torch113.jsonl.gz", "-o", out).CombinedOutput()
	if err == nil {
		t.Fatalf("plot of a run with no memory data succeeded:\n%s", msg)
	}
	if s := strings.TrimSpace(string(msg)); strings.Count(s, "\n") != 0 || !strings.Contains(s, "no memory data") {
		t.Errorf("want one line saying there is no memory data, got:\n%s", msg)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}
