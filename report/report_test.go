package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// wall is the fixed start of every generated run.
var wall = time.Date(2025, 11, 22, 7, 0, 0, 0, time.UTC)

// generate returns steps steps of a demo scenario.
func generate(t testing.TB, scenario string, steps int) []ipc.Message {
	t.Helper()
	return demo.Generate(mustScenario(t, scenario), demo.Config{Steps: steps, Wall: wall})
}

func mustScenario(t testing.TB, scenario string) demo.Scenario {
	t.Helper()
	sc, err := demo.Lookup(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// storeOf feeds messages (hello first) into a new store, each at its hook
// time. With nvml, each allocator snapshot is followed by an NVML sample:
// the process holds reserved plus a 416 MiB context.
func storeOf(msgs []ipc.Message, nvml bool) *session.Store { return storeWith(msgs, nvml) }

// storeWith is storeOf with the store's options.
func storeWith(msgs []ipc.Message, nvml bool, opts ...session.Option) *session.Store {
	s := session.New(opts...)
	c := msgs[0].Clock
	for i := range msgs {
		m := &msgs[i]
		sec, frac := math.Modf(c.Wall + (m.T - c.Mono))
		at := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
		s.Apply(session.Event{At: at, Conn: 1, Msg: m})
		if nvml && m.Mem != nil {
			used := m.Mem.Reserved + 416*session.MiB
			s.Apply(session.Event{At: at, GPU: &probe.Sample{
				At: at, Device: demo.DeviceUUID, Used: used, Total: demo.DeviceTotal, Reserved: -1, Free: demo.DeviceTotal - used, Util: -1,
				Processes: []probe.Process{{PID: msgs[0].PID, Used: used}},
			}})
		}
	}
	return s
}

// cpuRun strips a run down to what an older hook's CPU run sends (no
// memory source, no memory figures), anatomy included.
func cpuRun(msgs []ipc.Message) []ipc.Message {
	var out []ipc.Message
	for _, m := range msgs {
		if m.Type == ipc.TypeSample || m.Type == ipc.TypeAnatomy {
			continue
		}
		m.CUDA, m.Mem, m.MemSource, m.Span, m.SameAs = nil, nil, nil, "", nil
		if m.Hook != nil {
			h := *m.Hook
			h.ExactPeaks = false
			m.Hook = &h
		}
		m.Seq = uint64(len(out))
		out = append(out, m)
	}
	return out
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./report -update rewrites it)\n--- got\n%s", name, got)
	}
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name  string
		msgs  []ipc.Message
		nvml  bool
		write func(*Report, *bytes.Buffer) error
	}{
		{"warmup.txt.golden", generate(t, "warmup", 6), false, func(r *Report, b *bytes.Buffer) error { return r.WriteText(b) }},
		{"warmup.json.golden", generate(t, "warmup", 6), false, func(r *Report, b *bytes.Buffer) error { return r.WriteJSON(b) }},
		{"warmup_nvml.txt.golden", generate(t, "warmup", 6), true, func(r *Report, b *bytes.Buffer) error { return r.WriteText(b) }},
		{"leak_long.txt.golden", generate(t, "leak", 40), false, func(r *Report, b *bytes.Buffer) error { return r.WriteText(b) }},
		{"cpu.txt.golden", cpuRun(generate(t, "warmup", 6)), false, func(r *Report, b *bytes.Buffer) error { return r.WriteText(b) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := c.write(Build(storeOf(c.msgs, c.nvml)), &b); err != nil {
				t.Fatal(err)
			}
			golden(t, c.name, b.Bytes())
		})
	}
}

// decoded is the part of the JSON report the seed test reads.
type decoded struct {
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
			} `json:"phases"`
		} `json:"steps"`
		Diagnosis struct {
			Pattern  string `json:"pattern"`
			Headline string `json:"headline"`
		} `json:"diagnosis"`
	} `json:"processes"`
}

// TestSeedNumbers checks the report against the measured seq2seq + Adam
// run the warmup scenario reproduces: allocated, max_allocated and reserved
// at the end of each phase, in MiB.
func TestSeedNumbers(t *testing.T) {
	type triple [3]int64
	// The demo's hook has exact peaks: max allocated at a read is the peak
	// since the read before. Steps 0-2 read every phase; later steps are
	// plain, read once at their step end (the whole step's peak).
	want := map[int]map[string]triple{
		0: {"zero_grad": {281, 281, 284}, "forward": {2108, 2154, 2178}, "loss": {2566, 2566, 2635}, "backward": {1020, 3482, 3551}, "step": {1581, 1581, 3551}},
		1: {"zero_grad": {1581, 1581, 3551}, "forward": {2955, 3001, 3552}, "loss": {3413, 3413, 3552}, "backward": {1581, 4329, 4468}, "step": {1581, 1581, 4468}},
		2: {"zero_grad": {1581, 1581, 4468}, "forward": {2955, 3001, 4468}, "loss": {3413, 3413, 4468}, "backward": {1581, 4329, 4468}, "step": {1581, 1581, 4468}},
	}
	const steps = 6
	for i := 3; i < steps; i++ {
		want[i] = map[string]triple{"step": {1581, 4329, 4468}}
	}
	var b bytes.Buffer
	if err := Build(storeOf(generate(t, "warmup", steps), false)).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var r decoded
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != Schema || len(r.Processes) != 1 || len(r.Processes[0].Steps) != steps {
		t.Fatalf("schema %q, %d processes", r.Schema, len(r.Processes))
	}
	mib := func(v *int64) int64 {
		if v == nil || *v%session.MiB != 0 {
			t.Fatalf("not a whole MiB: %v", v)
		}
		return *v / session.MiB
	}
	for _, st := range r.Processes[0].Steps {
		if len(st.Phases) != 5 {
			t.Errorf("step %d: %d phases", st.Step, len(st.Phases))
		}
		for _, ph := range st.Phases {
			if _, read := want[st.Step][ph.Phase]; !read {
				if ph.AllocatedEnd != nil || ph.MaxAllocatedEnd != nil {
					t.Errorf("step %d %s: figures %v %v where the hook read nothing", st.Step, ph.Phase, ph.AllocatedEnd, ph.MaxAllocatedEnd)
				}
				continue
			}
			got := triple{mib(ph.AllocatedEnd), mib(ph.MaxAllocatedEnd), mib(ph.ReservedEnd)}
			if got != want[st.Step][ph.Phase] {
				t.Errorf("step %d %s: %v MiB, want %v", st.Step, ph.Phase, got, want[st.Step][ph.Phase])
			}
		}
	}
	if d := r.Processes[0].Diagnosis; d.Pattern != "warmup" || !strings.Contains(d.Headline, "3482→4329") {
		t.Errorf("diagnosis %+v", d)
	}
}

// byteFields lists the JSON names of every session.Bytes field reachable
// from Report, so the CPU test cannot miss one added later.
func byteFields(t reflect.Type, seen map[reflect.Type]bool, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	bytesType := reflect.TypeOf(session.Bytes(0))
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Type == bytesType:
			out[name] = true
		default:
			byteFields(f.Type, seen, out)
		}
	}
}

// TestCPURunHasNullNotZero: without a CUDA allocator, NVML and anatomy,
// every byte value in the JSON is null.
func TestCPURunHasNullNotZero(t *testing.T) {
	names := map[string]bool{}
	byteFields(reflect.TypeOf(Report{}), map[reflect.Type]bool{}, names)
	if len(names) < 20 {
		t.Fatalf("found only %d byte fields: %v", len(names), names)
	}
	var b bytes.Buffer
	if err := Build(storeOf(cpuRun(generate(t, "warmup", 6)), false)).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if names[k] {
					found[k]++
					if x != nil {
						t.Errorf("%s = %v on a CPU run, want null", k, x)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	for _, k := range []string{"allocated_end", "max_allocated_end", "reserved_end", "peak_allocated", "nvml_peak", "weights", "cache"} {
		if found[k] == 0 {
			t.Errorf("field %s never appears in the CPU report", k)
		}
	}
	if !strings.Contains(b.String(), `"steps_total": 6`) {
		t.Errorf("the CPU run lost its steps")
	}
}

func TestLongSessionsElideTheMiddleInTextOnly(t *testing.T) {
	const steps = 40
	r := Build(storeOf(generate(t, "steady", steps), false))
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "… 30 steps elided (first 5 and last 5 of 40 shown) …") {
		t.Errorf("no elision line:\n%s", text.String())
	}
	for _, step := range []string{"\n      4  same phases as step 2", "\n     35  same phases as step 2", "\n     39  same phases as step 2"} {
		if !strings.Contains(text.String(), step) {
			t.Errorf("text lacks row %q", step)
		}
	}
	if strings.Contains(text.String(), "\n      5  ") {
		t.Errorf("text shows an elided step")
	}
	var d decoded
	if err := json.Unmarshal(js.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if n := len(d.Processes[0].Steps); n != steps {
		t.Errorf("JSON has %d steps, want %d", n, steps)
	}
}

// withBetween is a steady run of 40 steps with what the hook read between
// steps 37 and 38 (a user phase of step 37, read at its end): 5000 MiB
// above the memory step 37 held, which is returned with its peak.
func withBetween(t *testing.T) ([]ipc.Message, session.Bytes) {
	t.Helper()
	msgs := generate(t, "steady", 40)
	at := -1
	for i, m := range msgs {
		if m.Type == ipc.TypePhase && m.Step == 37 && m.Edge == ipc.EdgeEnd && m.Mem != nil {
			at = i // the step's last read
		}
	}
	if at < 0 || msgs[at].Span != ipc.SpanStep {
		t.Fatalf("no plain step 37 to follow")
	}
	end := msgs[at]
	mem := *end.Mem
	mem.MaxAllocated = mem.Allocated + 5000*session.MiB
	mem.MaxReserved = max(mem.MaxReserved, mem.MaxAllocated)
	begin := ipc.Message{V: 1, Type: ipc.TypePhase, T: end.T + 0.001, Name: session.BetweenPhase, Step: 37, Edge: ipc.EdgeBegin, User: true}
	read := begin
	read.Edge, read.Mem = ipc.EdgeEnd, &mem
	msgs = append(msgs[:at+1], append([]ipc.Message{begin, read}, msgs[at+1:]...)...)
	for i := range msgs {
		msgs[i].Seq = uint64(i)
	}
	return msgs, session.Bytes(mem.MaxAllocated)
}

func TestAStepReadOnceShowsTheUserPhasesThatReadThemselves(t *testing.T) {
	msgs, peak := withBetween(t)
	var text bytes.Buffer
	if err := Build(storeOf(msgs, false)).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	k := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "     37  same phases as step") })
	if k < 0 || k+1 >= len(lines) {
		t.Fatalf("no row of step 37:\n%s", text.String())
	}
	row := strings.Fields(lines[k+1])
	if len(row) < 3 || row[0] != session.BetweenPhase || row[2] != peak.MiBString() {
		t.Fatalf("step 37 is followed by %q, want its between_steps row peaking at %s MiB", lines[k+1], peak.MiBString())
	}
	rows := 0
	for _, l := range lines { // the table's rows: the diagnosis names it too
		if strings.HasPrefix(l, "  totals:") {
			break
		}
		if f := strings.Fields(l); len(f) > 0 && f[0] == session.BetweenPhase {
			rows++
		}
	}
	if rows != 1 {
		t.Errorf("%d between_steps rows, want step 37's only:\n%s", rows, text.String())
	}
}
