package demo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// phaseKey names one phase of one step.
type phaseKey struct {
	step int
	name string
}

// endEdges returns the snapshot of every phase end edge.
func endEdges(t *testing.T, msgs []ipc.Message) map[phaseKey]ipc.Mem {
	t.Helper()
	out := map[phaseKey]ipc.Mem{}
	for _, m := range msgs {
		if m.Type == ipc.TypePhase && m.Edge == ipc.EdgeEnd {
			if m.Mem == nil {
				t.Fatalf("seq %d: end edge without mem", m.Seq)
			}
			out[phaseKey{m.Step, m.Name}] = *m.Mem
		}
	}
	return out
}

// phaseAllocs returns every allocated value seen inside each phase: the
// edges and the samples between them.
func phaseAllocs(msgs []ipc.Message) map[phaseKey][]int64 {
	out := map[phaseKey][]int64{}
	var cur *phaseKey
	for _, m := range msgs {
		switch {
		case m.Type == ipc.TypePhase && m.Edge == ipc.EdgeBegin:
			cur = &phaseKey{m.Step, m.Name}
			out[*cur] = append(out[*cur], m.Mem.Allocated)
		case m.Type == ipc.TypePhase:
			out[*cur] = append(out[*cur], m.Mem.Allocated)
			cur = nil
		case m.Type == ipc.TypeSample && cur != nil:
			out[*cur] = append(out[*cur], m.Mem.Allocated)
		}
	}
	return out
}

func peakOf(v []int64) int64 {
	var p int64
	for _, x := range v {
		p = max(p, x)
	}
	return p
}

func countOf(v []int64, want int64) int {
	n := 0
	for _, x := range v {
		if x == want {
			n++
		}
	}
	return n
}

func mustLookup(t testing.TB, name string) Scenario {
	t.Helper()
	sc, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// memMiB builds a snapshot from the measurement's MiB values.
func memMiB(alloc, maxAlloc, reserved int64) ipc.Mem {
	return ipc.Mem{Allocated: alloc * MiB, MaxAllocated: maxAlloc * MiB, Reserved: reserved * MiB, MaxReserved: reserved * MiB}
}

// The measured seq2seq + Adam run the warmup scenario reproduces.
var measured = map[string][2]ipc.Mem{ // phase: step 0, step 1 (and later)
	"zero_grad": {memMiB(281, 281, 284), memMiB(1581, 3482, 3551)},
	"forward":   {memMiB(2108, 2154, 2178), memMiB(2955, 3482, 3552)},
	"loss":      {memMiB(2566, 2566, 2635), memMiB(3413, 3482, 3552)},
	"backward":  {memMiB(1020, 3482, 3551), memMiB(1581, 4329, 4468)},
	"step":      {memMiB(1581, 3482, 3551), memMiB(1581, 4329, 4468)},
}

func TestWarmupMatchesMeasurement(t *testing.T) {
	ends := endEdges(t, Generate(mustLookup(t, "warmup"), Config{Steps: 5}))
	for step := 0; step < 5; step++ {
		for _, name := range phaseNames {
			want := measured[name][min(step, 1)]
			if step >= 2 {
				// No further growth: allocated follows step 1, the counters
				// and the cache stay at their step-1 highs.
				want.MaxAllocated, want.Reserved, want.MaxReserved = 4329*MiB, 4468*MiB, 4468*MiB
			}
			if got := ends[phaseKey{step, name}]; got != want {
				t.Errorf("step %d %s end: got %s, want %s", step, name, fmtMem(got), fmtMem(want))
			}
		}
	}
}

func TestWarmupTransients(t *testing.T) {
	allocs := phaseAllocs(Generate(mustLookup(t, "warmup"), Config{Steps: 6}))
	if n := countOf(allocs[phaseKey{0, "forward"}], 2154*MiB); n != 1 {
		t.Errorf("step 0 forward reaches 2154 MiB %d times, want once", n)
	}
	if n := countOf(allocs[phaseKey{0, "backward"}], 3482*MiB); n != 1 {
		t.Errorf("step 0 backward reaches 3482 MiB %d times, want once", n)
	}
	for step := 1; step < 6; step++ {
		v := allocs[phaseKey{step, "backward"}]
		if n := countOf(v, 4329*MiB); n != 1 {
			t.Errorf("step %d backward reaches 4329 MiB %d times, want once", step, n)
		}
		if p := peakOf(v); p != 4329*MiB {
			t.Errorf("step %d backward peak %d MiB, want 4329", step, p/MiB)
		}
	}
}

func TestSteadyHasEqualPeaks(t *testing.T) {
	const steps = 6
	msgs := Generate(mustLookup(t, "steady"), Config{Steps: steps})
	allocs, ends := phaseAllocs(msgs), endEdges(t, msgs)
	for _, name := range phaseNames {
		for step := 1; step < steps; step++ {
			if got, want := peakOf(allocs[phaseKey{step, name}]), peakOf(allocs[phaseKey{0, name}]); got != want {
				t.Errorf("%s peak: step %d %d B, step 0 %d B", name, step, got, want)
			}
			if got, want := ends[phaseKey{step, name}].Allocated, ends[phaseKey{0, name}].Allocated; got != want {
				t.Errorf("%s end: step %d %d B, step 0 %d B", name, step, got, want)
			}
		}
	}
	// The counters reach their final values within step 0.
	last := ends[phaseKey{steps - 1, "step"}]
	if first := ends[phaseKey{0, "step"}]; first.MaxAllocated != last.MaxAllocated || first.MaxReserved != last.MaxReserved {
		t.Errorf("counters after step 0 %s, after step %d %s", fmtMem(first), steps-1, fmtMem(last))
	}
}

func TestLeakGrowsByDocumentedAmount(t *testing.T) {
	const steps = 8
	msgs := Generate(mustLookup(t, "leak"), Config{Steps: steps})
	allocs, ends := phaseAllocs(msgs), endEdges(t, msgs)
	for _, name := range phaseNames {
		for step := 1; step < steps; step++ {
			prev, cur := phaseKey{step - 1, name}, phaseKey{step, name}
			if d := ends[cur].Allocated - ends[prev].Allocated; d != LeakPerStep {
				t.Errorf("%s end allocated grew %d B from step %d to %d, want %d", name, d, step-1, step, LeakPerStep)
			}
			if d := peakOf(allocs[cur]) - peakOf(allocs[prev]); d != LeakPerStep {
				t.Errorf("%s peak grew %d B from step %d to %d, want %d", name, d, step-1, step, LeakPerStep)
			}
			if d := ends[cur].MaxAllocated - ends[prev].MaxAllocated; name == "step" && d != LeakPerStep {
				t.Errorf("max_allocated grew %d B in step %d, want %d", d, step, LeakPerStep)
			}
		}
	}
	// The leak happens in forward: zero_grad keeps what it was given.
	for step := 0; step < steps; step++ {
		zg, fw := ends[phaseKey{step, "zero_grad"}], ends[phaseKey{step, "forward"}]
		steady := measured["forward"][1].Allocated - measured["zero_grad"][1].Allocated
		if d := fw.Allocated - zg.Allocated; d != steady+LeakPerStep {
			t.Errorf("step %d forward added %d B, want %d", step, d, steady+LeakPerStep)
		}
	}
}

func TestLookup(t *testing.T) {
	if got := strings.Join(Scenarios(), ","); got != "warmup,steady,leak" {
		t.Fatalf("Scenarios() = %s", got)
	}
	for _, name := range Scenarios() {
		if sc := mustLookup(t, name); sc.Name != name || sc.Summary == "" {
			t.Errorf("Lookup(%q) = %q, summary %q", name, sc.Name, sc.Summary)
		}
	}
	if sc := mustLookup(t, ""); sc.Name != DefaultScenario {
		t.Errorf("Lookup(\"\") = %q, want the default %q", sc.Name, DefaultScenario)
	}
	_, err := Lookup("oom")
	if err == nil {
		t.Fatal("Lookup(oom): no error")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, `"oom"`) ||
		!strings.Contains(msg, "warmup, steady, leak") {
		t.Errorf("Lookup(oom) error %q: want one line naming it and the valid names", msg)
	}
}

func fmtMem(m ipc.Mem) string {
	parts := make([]string, 0, 4)
	for _, v := range []int64{m.Allocated, m.MaxAllocated, m.Reserved, m.MaxReserved} {
		if v%MiB == 0 {
			parts = append(parts, fmt.Sprintf("%dMiB", v/MiB))
		} else {
			parts = append(parts, fmt.Sprintf("%dB", v))
		}
	}
	return strings.Join(parts, "/")
}
