package perfetto_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/export/perfetto"
	"github.com/vramscope/vramscope/internal/textesc"
)

// traceFile is the Trace Event Format's "JSON Object Format": an object
// whose traceEvents is the array of events; displayTimeUnit is "ms" or
// "ns"; otherData is free metadata.
type traceFile struct {
	TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
	DisplayTimeUnit string                       `json:"displayTimeUnit"`
	OtherData       map[string]string            `json:"otherData"`
}

// checkEvent checks one event against the fields the Trace Event Format
// documents for its phase: every event has name, ph, pid, tid (and ts but
// for metadata); "X" (complete) has a non-negative dur; "C" (counter) has
// args whose values are all numbers (each is a series); "i" (instant) has
// a scope s of "g", "p" or "t"; "M" (metadata) is one of the documented
// names and carries its argument.
func checkEvent(e map[string]json.RawMessage) error {
	var name, ph string
	if err := json.Unmarshal(e["name"], &name); err != nil || name == "" {
		return fmt.Errorf("name: %s", e["name"])
	}
	if err := json.Unmarshal(e["ph"], &ph); err != nil || len(ph) != 1 {
		return fmt.Errorf("ph: %s", e["ph"])
	}
	var pid, tid int64
	if err := json.Unmarshal(e["pid"], &pid); err != nil {
		return fmt.Errorf("pid: %s", e["pid"])
	}
	if err := json.Unmarshal(e["tid"], &tid); err != nil {
		return fmt.Errorf("tid: %s", e["tid"])
	}
	var ts float64
	if err := json.Unmarshal(e["ts"], &ts); (err != nil || ts < 0) && ph != "M" {
		return fmt.Errorf("ts: %s", e["ts"])
	}
	var args map[string]any
	if raw, ok := e["args"]; ok {
		if err := json.Unmarshal(raw, &args); err != nil {
			return fmt.Errorf("args: %s", raw)
		}
	}
	switch ph {
	case "X":
		var d float64
		if err := json.Unmarshal(e["dur"], &d); err != nil || d < 0 {
			return fmt.Errorf("complete event %q: dur %s", name, e["dur"])
		}
	case "C":
		if len(args) == 0 {
			return fmt.Errorf("counter %q without args", name)
		}
		for k, v := range args {
			if _, ok := v.(float64); !ok {
				return fmt.Errorf("counter %q: series %q is %T, not a number", name, k, v)
			}
		}
	case "i":
		var s string
		if err := json.Unmarshal(e["s"], &s); err != nil || (s != "g" && s != "p" && s != "t") {
			return fmt.Errorf("instant %q: scope %s", name, e["s"])
		}
	case "M":
		want := map[string]string{
			"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
			"thread_name": "name", "thread_sort_index": "sort_index",
		}[name]
		if want == "" {
			return fmt.Errorf("metadata event %q is not one the format documents", name)
		}
		if _, ok := args[want]; !ok {
			return fmt.Errorf("metadata %q without args.%s", name, want)
		}
	default:
		return fmt.Errorf("phase %q not expected in a vramscope trace", ph)
	}
	return nil
}

func exportFile(t *testing.T, path string) (*traceFile, []byte) {
	t.Helper()
	store, _, _, err := export.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := perfetto.Write(&buf, store, map[string]string{"recording": filepath.Base(path)}); err != nil {
		t.Fatal(err)
	}
	var tr traceFile
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tr); err != nil {
		t.Fatalf("%s: not the JSON Object Format: %v", path, err)
	}
	if tr.DisplayTimeUnit != "ms" && tr.DisplayTimeUnit != "ns" {
		t.Fatalf("displayTimeUnit %q", tr.DisplayTimeUnit)
	}
	for i, e := range tr.TraceEvents {
		if err := checkEvent(e); err != nil {
			t.Fatalf("%s: event %d: %v", path, i, err)
		}
	}
	return &tr, buf.Bytes()
}

type slice struct {
	name     string
	pid, tid int64
	ts, dur  float64
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPerfettoS001MatchesTheRunsOwnCounters exports the real H100 run and
// checks the trace against the run's own torch.cuda prints
// (s001_stat_cuda.json): the counters' highs are the script's
// max_memory_allocated and max_memory_reserved, to the byte.
func TestPerfettoS001MatchesTheRunsOwnCounters(t *testing.T) {
	tr, _ := exportFile(t, "../../testdata/h100/s001.jsonl.gz")
	var truth []struct {
		MaxAllocated int64 `json:"max_allocated"`
		MaxReserved  int64 `json:"max_reserved"`
	}
	raw, err := os.ReadFile("../../testdata/h100/s001_stat_cuda.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &truth); err != nil {
		t.Fatal(err)
	}
	var wantAlloc, wantRes int64
	for _, x := range truth {
		wantAlloc, wantRes = max(wantAlloc, x.MaxAllocated), max(wantRes, x.MaxReserved)
	}
	high := map[string]int64{}
	var steps, phases []slice
	names := map[string]bool{}
	for _, e := range tr.TraceEvents {
		ph, name := decode[string](t, e["ph"]), decode[string](t, e["name"])
		switch ph {
		case "C":
			v := int64(decode[map[string]float64](t, e["args"])["bytes"])
			high[name] = max(high[name], v)
		case "X":
			s := slice{name, decode[int64](t, e["pid"]), decode[int64](t, e["tid"]), decode[float64](t, e["ts"]), decode[float64](t, e["dur"])}
			if decode[string](t, e["cat"]) == "step" {
				steps = append(steps, s)
			} else {
				phases = append(phases, s)
			}
		case "M":
			if n, ok := decode[map[string]any](t, e["args"])["name"].(string); ok {
				names[n] = true
			}
		}
	}
	if high["max allocated"] != wantAlloc || high["reserved"] != wantRes {
		t.Fatalf("counter highs: max allocated %d reserved %d, the run printed %d and %d",
			high["max allocated"], high["reserved"], wantAlloc, wantRes)
	}
	if high["allocated"] == 0 || high["nvml process used"] == 0 || high["nvml device used"] == 0 {
		t.Fatalf("missing counter tracks: %v", high)
	}
	if !names["pid 618 · vm · cuda:0"] || !names["steps and phases"] {
		t.Fatalf("process/thread names: %v", names)
	}
	// six steps of five phases (seed001.py --steps 6), each phase inside
	// its step's slice on the same track, so the viewers nest them.
	if len(steps) != 6 || len(phases) != 30 {
		t.Fatalf("%d step slices, %d phase slices; want 6 and 30", len(steps), len(phases))
	}
	for _, p := range phases {
		in := 0
		for _, s := range steps {
			if s.pid == p.pid && s.tid == p.tid && p.ts >= s.ts && p.ts+p.dur <= s.ts+s.dur {
				in++
			}
		}
		if in != 1 {
			t.Fatalf("phase %s at %.3f µs lies in %d step slices", p.name, p.ts, in)
		}
	}
}

// TestPerfettoEveryRecordingFollowsTheFormat checks every real recording
// and fixture: two processes on one GPU (live), framework sessions with
// user phases (clients), an OOM death (oom), marks (small).
func TestPerfettoEveryRecordingFollowsTheFormat(t *testing.T) {
	for _, c := range []struct {
		path           string
		procs, instant int
		userTrack      bool
	}{
		{"../../testdata/h100/live.jsonl.gz", 2, 0, false},
		{"../../testdata/h100/clients.jsonl.gz", 0, 0, true},
		{"../../testdata/h100/oom.jsonl.gz", 1, 0, false},
		{"../../testdata/recordings/small.jsonl", 1, 1, false},
	} {
		tr, out := exportFile(t, c.path)
		checkNesting(t, c.path, tr)
		procNames, instants, user := 0, 0, false
		for _, e := range tr.TraceEvents {
			ph, name := decode[string](t, e["ph"]), decode[string](t, e["name"])
			if ph == "M" && name == "process_name" && decode[int64](t, e["pid"]) < 1<<22 {
				procNames++
			}
			if ph == "i" {
				instants++
			}
			if ph == "M" && name == "thread_name" && decode[map[string]any](t, e["args"])["name"] == "user phases" {
				user = true
			}
		}
		if c.procs > 0 && procNames != c.procs {
			t.Errorf("%s: %d training processes, want %d", c.path, procNames, c.procs)
		}
		if instants != c.instant || user != c.userTrack {
			t.Errorf("%s: %d instant events (want %d), user track %v (want %v)", c.path, instants, c.instant, user, c.userTrack)
		}
		// The OOM run died in step 21 before its loss phase ended: the
		// phase is drawn to the process's last event, marked unfinished.
		unfinished := []string{}
		for _, e := range tr.TraceEvents {
			if args := decode[map[string]any](t, e["args"]); args["unfinished"] == true {
				unfinished = append(unfinished, fmt.Sprintf("%s of step %v", decode[string](t, e["name"]), args["step"]))
			}
		}
		want := []string{}
		if strings.Contains(c.path, "oom") {
			want = []string{"loss of step 21"}
		}
		if fmt.Sprint(unfinished) != fmt.Sprint(want) {
			t.Errorf("%s: unfinished phases %v, want %v", c.path, unfinished, want)
		}
		if name := os.Getenv("VRAMSCOPE_TRACE_DIR"); name != "" { // for the external readers
			if err := os.WriteFile(filepath.Join(name, filepath.Base(c.path)+".trace.json"), out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPerfettoReadByTraceModel loads the traces with a real reader of the
// format, @tracerbench/trace-model (npm), through testdata/read_trace.js:
// the reader must find the processes by their metadata names, nest every
// phase of s001 inside its step's slice, see the counters and the mark.
// It needs node and the package on NODE_PATH (.ci/run installs both); it
// is skipped without them unless VRAMSCOPE_REQUIRE_TRACE_READER=1.
func TestPerfettoReadByTraceModel(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		err = exec.Command(node, "-e", "require('@tracerbench/trace-model')").Run()
	}
	if err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_TRACE_READER") == "1" {
			t.Fatalf("node with @tracerbench/trace-model on NODE_PATH: %v", err)
		}
		t.Skipf("SKIPPED: no node with @tracerbench/trace-model on NODE_PATH (%v)", err)
	}
	dir := t.TempDir()
	var paths []string
	for _, src := range []string{"../../testdata/h100/s001.jsonl.gz", "../../testdata/recordings/small.jsonl"} {
		_, out := exportFile(t, src)
		p := filepath.Join(dir, filepath.Base(src)+".json")
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cmd := exec.Command(node, append([]string{"testdata/read_trace.js"}, paths...)...)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("trace-model could not read the traces: %v", err)
	}
	type modelSlice struct {
		Name   string  `json:"name"`
		Parent *string `json:"parent"`
	}
	type model []struct {
		Name     string `json:"name"`
		Labels   string `json:"labels"`
		Counters int    `json:"counters"`
		Threads  []struct {
			Name     string       `json:"name"`
			Slices   []modelSlice `json:"slices"`
			Instants int          `json:"instants"`
		} `json:"threads"`
	}
	var got map[string]model
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("reader output: %v", err)
	}
	s001, small := got[paths[0]], got[paths[1]]
	if len(s001) != 2 || s001[0].Name != "pid 618 · vm · cuda:0" || s001[0].Counters == 0 || s001[1].Counters == 0 {
		t.Fatalf("s001 as the reader built it: %+v", s001)
	}
	phases := 0
	for _, sl := range s001[0].Threads[0].Slices {
		if sl.Parent == nil {
			if !strings.HasPrefix(sl.Name, "step ") {
				t.Fatalf("top-level slice %q is not a step", sl.Name)
			}
			continue
		}
		phases++
		if !strings.HasPrefix(*sl.Parent, "step ") {
			t.Fatalf("phase %q nested in %q", sl.Name, *sl.Parent)
		}
	}
	if phases != 30 {
		t.Fatalf("the reader nested %d phases in steps, want 30", phases)
	}
	if len(small) == 0 || small[0].Labels != "rank 0" || small[0].Threads[0].Instants != 1 {
		t.Fatalf("small as the reader built it: %+v", small)
	}
}

// checkNesting checks what the viewers need of complete events on one
// thread: two slices either nest or do not overlap at all.
func checkNesting(t *testing.T, path string, tr *traceFile) {
	t.Helper()
	byTrack := map[[2]int64][]slice{}
	for _, e := range tr.TraceEvents {
		if decode[string](t, e["ph"]) != "X" {
			continue
		}
		s := slice{decode[string](t, e["name"]), decode[int64](t, e["pid"]), decode[int64](t, e["tid"]), decode[float64](t, e["ts"]), decode[float64](t, e["dur"])}
		byTrack[[2]int64{s.pid, s.tid}] = append(byTrack[[2]int64{s.pid, s.tid}], s)
	}
	for _, ss := range byTrack {
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				aEnd, bEnd := a.ts+a.dur, b.ts+b.dur
				overlap := a.ts < bEnd && b.ts < aEnd
				nested := (a.ts <= b.ts && bEnd <= aEnd) || (b.ts <= a.ts && aEnd <= bEnd)
				if overlap && !nested {
					t.Fatalf("%s: %s [%.0f, %.0f] and %s [%.0f, %.0f] cross on pid %d tid %d",
						path, a.name, a.ts, aEnd, b.name, b.ts, bEnd, a.pid, a.tid)
				}
			}
		}
	}
}

// The CSV's micro is a count and the Perfetto phase's "micro" was
// an index under the same name. "micro" is a count in both (the step
// slice's); the phase's is "backwards_before", at most its step's count.
func TestPerfettoMicroIsACountAsInTheCSV(t *testing.T) {
	tr, _ := exportFile(t, "../../testdata/h100/s001.jsonl.gz")
	count := map[float64]float64{}
	var phases []map[string]any
	for _, e := range tr.TraceEvents {
		if decode[string](t, e["ph"]) != "X" {
			continue
		}
		args := decode[map[string]any](t, e["args"])
		if decode[string](t, e["cat"]) == "step" {
			count[args["step"].(float64)] = args["micro"].(float64)
		} else {
			phases = append(phases, args)
		}
	}
	for _, a := range phases {
		idx, ok := a["backwards_before"].(float64)
		if _, has := a["micro"]; has || !ok || idx < 0 || idx > count[a["step"].(float64)] {
			t.Fatalf("phase args %v: want backwards_before at most step %v's count %v, and no micro", a, a["step"], count[a["step"].(float64)])
		}
	}
	if len(count) != 6 || len(phases) != 30 {
		t.Fatalf("%d steps, %d phases", len(count), len(phases))
	}
}

// TestPerfettoShowsHostileTextEscaped: the trace's names and text
// arguments are what Perfetto's UI shows, and a hostile recording's bidi
// controls and C0 bytes reached it raw (a name that reads as another).
// They are escaped by textesc, the escaper of every other view.
func TestPerfettoShowsHostileTextEscaped(t *testing.T) {
	s, _, _, err := export.Load("../../testdata/recordings/hostile_text.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := perfetto.Write(&b, s, nil); err != nil {
		t.Fatal(err)
	}
	var tr traceFile
	if err := json.Unmarshal(b.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			texts = append(texts, v)
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, e := range tr.TraceEvents {
		for _, raw := range e {
			var v any
			json.Unmarshal(raw, &v)
			walk(v)
		}
	}
	escaped := 0
	for _, s := range texts {
		if !textesc.Safe(s) {
			t.Errorf("shown raw: %q", s)
		}
		if strings.Contains(s, `\u202e`) {
			escaped++
		}
	}
	if escaped == 0 {
		t.Error("no text shows the bidi override escaped")
	}
}
