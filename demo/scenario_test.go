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

// endEdges returns the snapshot of every phase end edge that carries one
// (a plain step's only read is its step end).
func endEdges(msgs []ipc.Message) map[phaseKey]ipc.Mem {
	out := map[phaseKey]ipc.Mem{}
	for _, m := range msgs {
		if m.Type == ipc.TypePhase && m.Edge == ipc.EdgeEnd && m.Mem != nil {
			out[phaseKey{m.Step, m.Name}] = *m.Mem
		}
	}
	return out
}

// stepPeaks returns each step's exact peak, the largest max_allocated of
// its reads (the counters are reset after every read).
func stepPeaks(msgs []ipc.Message) map[int]int64 {
	out := map[int]int64{}
	for _, m := range msgs {
		if m.Type == ipc.TypePhase && m.Edge == ipc.EdgeEnd && m.Mem != nil {
			out[m.Step] = max(out[m.Step], m.Mem.MaxAllocated)
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
			if m.Mem != nil {
				out[*cur] = append(out[*cur], m.Mem.Allocated)
			}
		case m.Type == ipc.TypePhase:
			if m.Mem != nil {
				out[*cur] = append(out[*cur], m.Mem.Allocated)
			}
			cur = nil
		case m.Type == ipc.TypeSample && cur != nil:
			out[*cur] = append(out[*cur], m.Mem.Allocated)
		}
	}
	return out
}

// sampledPhases are the phases long enough for a sample to show their
// transient top in every step, read or not (forward 120 ms, backward
// 230 ms); a plain step's other phases have no figure of their own.
var sampledPhases = []string{"forward", "backward"}

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

// The measured seq2seq + Adam run the warmup scenario reproduces, as an
// exact-peaks hook reads it: max allocated is the peak since the read
// before (the counters are reset after each read), reserved only grows.
var measured = map[string][2]ipc.Mem{ // phase: step 0, step 1 (and later)
	"zero_grad": {memMiB(281, 281, 284), memMiB(1581, 1581, 3551)},
	"forward":   {memMiB(2108, 2154, 2178), memMiB(2955, 3001, 3552)},
	"loss":      {memMiB(2566, 2566, 2635), memMiB(3413, 3413, 3552)},
	"backward":  {memMiB(1020, 3482, 3551), memMiB(1581, 4329, 4468)},
	"step":      {memMiB(1581, 1581, 3551), memMiB(1581, 1581, 4468)},
}

func TestWarmupMatchesMeasurement(t *testing.T) {
	msgs := Generate(mustLookup(t, "warmup"), Config{Steps: 6})
	ends := endEdges(msgs)
	for step := 0; step <= 2; step++ { // breakdown steps: every phase read
		for _, name := range phaseNames {
			want := measured[name][min(step, 1)]
			if step == 2 {
				want.Reserved, want.MaxReserved = 4468*MiB, 4468*MiB // the cache grew in step 1
			}
			if got := ends[phaseKey{step, name}]; got != want {
				t.Errorf("step %d %s end: got %s, want %s", step, name, fmtMem(got), fmtMem(want))
			}
		}
	}
	// Plain steps: one read at the step end, the whole step's peak, the
	// same as step 2's to the byte.
	for _, m := range msgs {
		if m.Type != ipc.TypePhase || m.Step < 3 || m.Mem == nil {
			continue
		}
		if want := memMiB(1581, 4329, 4468); m.Name != "step" || m.Edge != ipc.EdgeEnd || *m.Mem != want ||
			m.Span != ipc.SpanStep || m.SameAs == nil || *m.SameAs != 2 {
			t.Errorf("step %d: %s %s read %s span %q same_as %v, want only the step end %s, span step, same as 2",
				m.Step, m.Name, m.Edge, fmtMem(*m.Mem), m.Span, m.SameAs, fmtMem(want))
		}
	}
	if p := stepPeaks(msgs); p[0] != 3482*MiB || p[1] != 4329*MiB || p[5] != 4329*MiB {
		t.Errorf("step peaks %v, want 3482, 4329, ... 4329 MiB", p)
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
	allocs, ends, peaks := phaseAllocs(msgs), endEdges(msgs), stepPeaks(msgs)
	for _, name := range sampledPhases {
		for step := 1; step < steps; step++ {
			if got, want := peakOf(allocs[phaseKey{step, name}]), peakOf(allocs[phaseKey{0, name}]); got != want {
				t.Errorf("%s peak: step %d %d B, step 0 %d B", name, step, got, want)
			}
		}
	}
	// Every step peaks and holds the same; the cache is full within step 0.
	for step := 1; step < steps; step++ {
		last, first := ends[phaseKey{step, "step"}], ends[phaseKey{0, "step"}]
		if peaks[step] != peaks[0] || last.Allocated != first.Allocated || last.Reserved != first.Reserved {
			t.Errorf("step %d: peak %d held %s, step 0: peak %d held %s", step, peaks[step], fmtMem(last), peaks[0], fmtMem(first))
		}
	}
}

func TestLeakGrowsByDocumentedAmount(t *testing.T) {
	const steps = 8
	msgs := Generate(mustLookup(t, "leak"), Config{Steps: steps})
	allocs, ends, peaks := phaseAllocs(msgs), endEdges(msgs), stepPeaks(msgs)
	for step := 1; step < steps; step++ {
		for _, name := range sampledPhases {
			prev, cur := phaseKey{step - 1, name}, phaseKey{step, name}
			if d := peakOf(allocs[cur]) - peakOf(allocs[prev]); d != LeakPerStep {
				t.Errorf("%s peak grew %d B from step %d to %d, want %d", name, d, step-1, step, LeakPerStep)
			}
		}
		prev, cur := phaseKey{step - 1, "step"}, phaseKey{step, "step"}
		if d := ends[cur].Allocated - ends[prev].Allocated; d != LeakPerStep {
			t.Errorf("held memory grew %d B from step %d to %d, want %d", d, step-1, step, LeakPerStep)
		}
		if d := peaks[step] - peaks[step-1]; d != LeakPerStep {
			t.Errorf("the step peak grew %d B in step %d, want %d", d, step, LeakPerStep)
		}
	}
	// The leak happens in forward: zero_grad keeps what it was given (steps
	// 0-2 read zero_grad's end).
	for step := 0; step <= 2; step++ {
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
