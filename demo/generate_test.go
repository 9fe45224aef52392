package demo

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// checkInvariants checks one rank's whole sequence against the protocol and
// the allocator's rules.
func checkInvariants(t *testing.T, msgs []ipc.Message, steps int) {
	t.Helper()
	if len(msgs) < 2 || msgs[0].Type != ipc.TypeHello || msgs[len(msgs)-1].Type != ipc.TypeGoodbye {
		t.Fatalf("sequence does not run from hello to goodbye (%d messages)", len(msgs))
	}
	var (
		prevT, lastSample float64
		prevMem           *ipc.Mem
		prevRead          bool // prevMem was a phase read: the counters were reset after it
		lastEnd           *ipc.Mem
		breakdown         = true // the step reads its phases
		open              string // phase begun and not ended
		next              = 0    // index into phaseNames of the next phase
		step              = 0
		anatomies         []int
		stats             []float64
	)
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			t.Fatalf("seq %d (%s): %v", m.Seq, m.Type, err)
		}
		if m.Seq != uint64(i) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
		if m.T < prevT {
			t.Fatalf("seq %d: t %v before %v", m.Seq, m.T, prevT)
		}
		prevT = m.T
		if mem := m.Mem; mem != nil {
			if mem.MaxAllocated < mem.Allocated || mem.MaxReserved < mem.Reserved || mem.Reserved < mem.Allocated {
				t.Fatalf("seq %d: inconsistent snapshot %s", m.Seq, fmtMem(*mem))
			}
			// Each phase read resets the counters to the current values;
			// a begin edge that repeats the end read before it is that read.
			repeat := m.Type == ipc.TypePhase && m.Edge == ipc.EdgeBegin
			if p := prevMem; p != nil && !repeat {
				floorA, floorR := p.MaxAllocated, p.MaxReserved
				if prevRead {
					floorA, floorR = p.Allocated, p.Reserved
				}
				if mem.MaxAllocated < floorA || mem.MaxReserved < floorR {
					t.Fatalf("seq %d: a peak counter fell without a reset: %s after %s", m.Seq, fmtMem(*mem), fmtMem(*p))
				}
				if mem.MaxAllocated > max(floorA, mem.Allocated) || mem.MaxReserved > max(floorR, mem.Reserved) {
					t.Fatalf("seq %d: a peak counter rose where no snapshot shows it: %s after %s", m.Seq, fmtMem(*mem), fmtMem(*p))
				}
			}
			if !repeat {
				prevMem, prevRead = mem, m.Type == ipc.TypePhase
			}
		}
		switch m.Type {
		case ipc.TypeHello:
			if i != 0 {
				t.Fatalf("seq %d: hello after the start", m.Seq)
			}
		case ipc.TypePhase:
			if m.Edge == ipc.EdgeBegin {
				if open != "" || m.Name != phaseNames[next] || m.Step != step {
					t.Fatalf("seq %d: begin %s of step %d, want %s of step %d (open %q)", m.Seq, m.Name, m.Step, phaseNames[next], step, open)
				}
				// Only loss and backward begins of a breakdown step
				// repeat the end read just before them.
				if repeats := breakdown && (m.Name == "loss" || m.Name == "backward"); repeats != (m.Mem != nil) ||
					repeats && (lastEnd == nil || *lastEnd != *m.Mem) {
					t.Fatalf("seq %d: %s begin of step %d (breakdown %v) carries %v, the end before it %v", m.Seq, m.Name, step, breakdown, m.Mem, lastEnd)
				}
				open = m.Name
				continue
			}
			if open != m.Name || m.Step != step {
				t.Fatalf("seq %d: end %s of step %d while %q is open in step %d", m.Seq, m.Name, m.Step, open, step)
			}
			closing := m.Name == "step"
			if read := closing || breakdown && (m.Name != "zero_grad" || step <= 2); read != (m.Mem != nil) {
				t.Fatalf("seq %d: %s end of step %d (breakdown %v) carries %v", m.Seq, m.Name, step, breakdown, m.Mem)
			}
			if plain := closing && !breakdown; plain != (m.Span == ipc.SpanStep) {
				t.Fatalf("seq %d: %s end of step %d (breakdown %v) has span %q", m.Seq, m.Name, step, breakdown, m.Span)
			}
			open, lastEnd = "", m.Mem
			if next++; next == len(phaseNames) {
				moved := m.Span == ipc.SpanStep && m.SameAs == nil
				next, step = 0, step+1
				breakdown = step <= 2 || step%100 == 50 || moved
			}
		case ipc.TypeSample:
			if lastSample != 0 && math.Abs(m.T-lastSample-1.0/SampleHz) > 1e-9 {
				t.Fatalf("seq %d: sample %.6f s after the previous one, want %.3f", m.Seq, m.T-lastSample, 1.0/SampleHz)
			}
			lastSample = m.T
		case ipc.TypeAnatomy:
			anatomies = append(anatomies, m.Step)
		case ipc.TypeStats, ipc.TypeGoodbye:
			if m.Stats == nil || m.Stats.Created != m.Seq+1 {
				t.Fatalf("seq %d: stats %+v, want created = seq+1", m.Seq, m.Stats)
			}
			if m.Type == ipc.TypeStats {
				stats = append(stats, m.T)
			}
		}
	}
	if step != steps || open != "" {
		t.Fatalf("ended in step %d with %q open, want %d full steps", step, open, steps)
	}
	var want []int
	for s := 0; s < steps; s++ {
		if s <= 2 || s%100 == 0 {
			want = append(want, s)
		}
	}
	if !equalInts(anatomies, want) {
		t.Errorf("anatomy on steps %v, want %v", anatomies, want)
	}
	virtualSpan := msgs[len(msgs)-1].T - msgs[0].T
	if n := len(stats); n != int(virtualSpan) {
		t.Errorf("%d stats over %.2f virtual seconds, want one a second", n, virtualSpan)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestInvariants(t *testing.T) {
	for _, name := range Scenarios() {
		for _, cfg := range []Config{{Steps: 101}, {Steps: 7, Rank: 2, WorldSize: 4}} {
			t.Run(name, func(t *testing.T) {
				checkInvariants(t, Generate(mustLookup(t, name), cfg), cfg.Steps)
			})
		}
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	for _, name := range Scenarios() {
		sc := mustLookup(t, name)
		cfg := Config{Steps: 12, Rank: 1, WorldSize: 2, Wall: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)}
		a, b := marshalAll(t, Generate(sc, cfg)), marshalAll(t, Generate(sc, cfg))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two generations differ", name)
		}
		// Step by step, with a reused buffer, gives the same bytes.
		g := NewGenerator(sc, cfg)
		var lines [][]byte
		buf := g.Start(nil)
		for i := 0; i < cfg.Steps; i++ {
			buf = g.Next(buf)
			lines = append(lines, marshalAll(t, buf))
			buf = buf[:0]
		}
		lines = append(lines, marshalAll(t, []ipc.Message{g.Goodbye("exit")}))
		if c := bytes.Join(lines, nil); !bytes.Equal(a, c) {
			t.Errorf("%s: the generator step by step differs from Generate", name)
		}
	}
}

func marshalAll(t *testing.T, msgs []ipc.Message) []byte {
	t.Helper()
	var out []byte
	for i := range msgs {
		b, err := json.Marshal(&msgs[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	return out
}

func TestHello(t *testing.T) {
	wall := time.Date(2025, 3, 4, 5, 6, 7, 250e6, time.UTC)
	single := Generate(Scenario{}, Config{Wall: wall})[0]
	if single.PID != PIDBase || single.Rank != nil || single.WorldSize != nil {
		t.Errorf("single process hello: pid %d rank %v world %v, want %d and null ranks", single.PID, single.Rank, single.WorldSize, PIDBase)
	}
	if c := single.CUDA; c == nil || c.UUID != DeviceUUID || c.Total != 80<<30 || c.Name != DeviceName {
		t.Errorf("cuda = %+v", single.CUDA)
	}
	if c := single.Clock; c == nil || c.Mono != single.T || c.Wall != 1741064767.25 {
		t.Errorf("clock = %+v, want mono = t and wall = %v", single.Clock, wall)
	}
	// Today's hook on CUDA: exact peaks, and the memory source it reads.
	if h := single.Hook; h == nil || h.SampleHz != 50 || !h.ExactPeaks || h.ResetPeaks {
		t.Errorf("hook = %+v, want exact peaks at 50 Hz", single.Hook)
	}
	if s := single.MemSource; s == nil || s.Kind != ipc.SourceCUDA || s.Peaks != ipc.PeaksExact {
		t.Errorf("mem_source = %+v, want cuda with exact peaks", single.MemSource)
	}
	seen := map[string]bool{single.Session: true}
	for r := 0; r < 3; r++ {
		h := Generate(mustLookup(t, "warmup"), Config{Rank: r, WorldSize: 3, Wall: wall})[0]
		if h.PID != PIDBase+r || h.Rank == nil || *h.Rank != r || *h.LocalRank != r || *h.WorldSize != 3 {
			t.Errorf("rank %d hello: pid %d rank %v", r, h.PID, h.Rank)
		}
		if r > 0 && seen[h.Session] {
			t.Errorf("rank %d reuses session %q", r, h.Session)
		}
		seen[h.Session] = true
	}
}

func TestRankOffset(t *testing.T) {
	sc := mustLookup(t, "leak")
	base := Generate(sc, Config{Steps: 3, WorldSize: 3})
	r2 := Generate(sc, Config{Steps: 3, Rank: 2, WorldSize: 3})
	if len(base) != len(r2) {
		t.Fatalf("rank 0 has %d messages, rank 2 %d", len(base), len(r2))
	}
	for i := range base {
		a, b := base[i].Mem, r2[i].Mem
		if a == nil || b == nil {
			continue
		}
		off := 2 * RankOffset
		if b.Allocated-a.Allocated != off || b.MaxAllocated-a.MaxAllocated != off || b.Reserved-a.Reserved != off || b.MaxReserved-a.MaxReserved != off {
			t.Fatalf("seq %d: rank 2 %s vs rank 0 %s, want +%d MiB each", i, fmtMem(*b), fmtMem(*a), off/MiB)
		}
	}
}

func TestAnatomyMatchesTheNumbers(t *testing.T) {
	msgs := Generate(mustLookup(t, "warmup"), Config{Steps: 2})
	ends := endEdges(msgs)
	for _, m := range msgs {
		if m.Type != ipc.TypeAnatomy {
			continue
		}
		if m.Weights != ends[phaseKey{0, "zero_grad"}].Allocated {
			t.Errorf("step %d: weights %d, want step 0's zero_grad allocation", m.Step, m.Weights)
		}
		if want := ends[phaseKey{0, "step"}].Allocated - ends[phaseKey{0, "backward"}].Allocated; m.Optimizer != want {
			t.Errorf("step %d: optimizer %d, want what step 0's step created, %d", m.Step, m.Optimizer, want)
		}
		if want := ends[phaseKey{m.Step, "loss"}].Allocated - ends[phaseKey{m.Step, "zero_grad"}].Allocated; m.Activations == nil || *m.Activations != want {
			t.Errorf("step %d: activations %v, want forward + loss's growth %d", m.Step, m.Activations, want)
		}
		if m.Params != m.Weights/4 || m.Gradients != m.Weights || m.Device != "cuda" || m.BatchSize == nil || *m.BatchSize != 32 {
			t.Errorf("step %d: anatomy %+v", m.Step, m)
		}
	}
}

func TestZeroConfigs(t *testing.T) {
	// The zero Scenario is the default one; a bad rank is normalized.
	if a, b := marshalAll(t, Generate(Scenario{}, Config{Steps: 2})), marshalAll(t, Generate(mustLookup(t, ""), Config{Steps: 2})); !bytes.Equal(a, b) {
		t.Error("the zero Scenario differs from the default one")
	}
	if msgs := Generate(Scenario{}, Config{Steps: -3, Rank: -1}); len(msgs) != 2 || msgs[0].PID != PIDBase {
		t.Errorf("no steps, rank -1: %d messages, pid %d; want hello and goodbye of rank 0", len(msgs), msgs[0].PID)
	}
	h := Generate(Scenario{}, Config{Rank: 5})[0]
	if h.WorldSize == nil || *h.WorldSize != 6 {
		t.Errorf("rank 5 without a world size: world_size %v, want 6", h.WorldSize)
	}
}

// An endless run reuses one step's worth of memory: once its first steps
// (the largest: hello, breakdown reads, anatomy) have sized the buffer,
// no later step grows it. (Their count, not a capacity, sets the limit:
// append rounds a capacity up to the allocator's size classes, which
// move with the size of ipc.Message.)
func TestGeneratorIsBounded(t *testing.T) {
	g := NewGenerator(mustLookup(t, "leak"), Config{})
	var buf []ipc.Message
	most := 0
	for range 4 {
		buf = g.Next(buf[:0])
		most = max(most, len(buf))
	}
	buf = make([]ipc.Message, 0, most)
	limit := cap(buf)
	for i := 0; i < 2000; i++ {
		buf = g.Next(buf[:0])
		if cap(buf) > limit || len(buf) > 40 {
			t.Fatalf("step %d: %d messages, buffer grew from %d to %d", g.Steps(), len(buf), limit, cap(buf))
		}
	}
}

func BenchmarkGeneratorStep(b *testing.B) {
	g := NewGenerator(mustLookup(b, "warmup"), Config{})
	var buf []ipc.Message
	for b.Loop() {
		buf = g.Next(buf[:0])
	}
}

// A Host rank is a CPU run as today's hook sends it: mem_source cpu, no
// CUDA device, no samples, every phase end read, allocated = reserved.
func TestHostRankIsACPURun(t *testing.T) {
	msgs := Generate(mustLookup(t, "warmup"), Config{Steps: 5, Host: true})
	h := msgs[0]
	if h.CUDA != nil || h.MemSource == nil || h.MemSource.Kind != ipc.SourceCPU || h.MemSource.Peaks != ipc.PeaksExact {
		t.Fatalf("hello cuda %v mem_source %+v", h.CUDA, h.MemSource)
	}
	ends := 0
	for _, m := range msgs {
		if err := m.Validate(); err != nil {
			t.Fatalf("seq %d: %v", m.Seq, err)
		}
		switch {
		case m.Type == ipc.TypeSample:
			t.Fatalf("seq %d: a sample on a CPU run", m.Seq)
		case m.Type == ipc.TypePhase && m.Edge == ipc.EdgeEnd:
			ends++
			if m.Mem == nil || m.Span != "" || m.Mem.Reserved != m.Mem.Allocated || m.Mem.MaxReserved != m.Mem.MaxAllocated {
				t.Fatalf("seq %d: %s end of step %d: %+v span %q", m.Seq, m.Name, m.Step, m.Mem, m.Span)
			}
		case m.Type == ipc.TypeAnatomy && m.Device != "cpu":
			t.Fatalf("anatomy on %q", m.Device)
		}
	}
	if ends != 5*5 {
		t.Errorf("%d phase ends read, want 25", ends)
	}
	if p := stepPeaks(msgs); p[1] != 4329*MiB || p[4] != 4329*MiB {
		t.Errorf("step peaks %v: the transient tops are still read", p)
	}
}
