package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
)

// withSource turns a demo run into what a hook reading src sends: the
// hello names the source; on cpu there is no device and allocated =
// reserved (the RSS).
func withSource(msgs []ipc.Message, src ipc.MemSource) []ipc.Message {
	out := make([]ipc.Message, 0, len(msgs))
	for _, m := range msgs {
		if src.Kind == ipc.SourceCPU && m.Mem != nil {
			mem := *m.Mem
			mem.Reserved, mem.MaxReserved = mem.Allocated, mem.MaxAllocated
			m.Mem = &mem
		}
		switch m.Type {
		case ipc.TypeHello:
			s := src
			m.MemSource = &s
			if src.Kind != ipc.SourceCUDA && src.Kind != ipc.SourceROCm {
				m.CUDA = nil
			}
		case ipc.TypeAnatomy:
			if src.Kind == ipc.SourceCPU {
				m.Device = "cpu"
			}
		}
		out = append(out, m)
	}
	return out
}

// TestHostLeakGolden: a CPU run's report is an RSS × time table with a
// figure in every cell, a host-memory diagnosis with the leak's rate, and
// no allocator-only rows.
func TestHostLeakGolden(t *testing.T) {
	msgs := withSource(demo.Generate(mustScenario(t, "leak"), demo.Config{Steps: 12, Wall: wall, EveryPhase: true}),
		ipc.MemSource{Kind: ipc.SourceCPU, Peaks: ipc.PeaksExact})
	r := Build(storeOf(msgs, false))
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "host_leak.txt.golden", b.Bytes())
	text := b.String()
	for _, want := range []string{"CPU · host memory (RSS)", "memory: host memory", "rss end   peak rss", "peak RSS", "= RSS", "host memory (RSS): growth"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q:\n%s", want, text)
		}
	}
	for _, no := range []string{"allocator cache", "    = reserved", "peak reserved", "largest part"} {
		if strings.Contains(text, no) {
			t.Errorf("%q on a CPU run:\n%s", no, text)
		}
	}
	if m := r.Processes[0].Memory; m.Kind != "cpu" || m.Peaks != "exact" || len(m.NotAvailable) == 0 {
		t.Errorf("memory %+v", m)
	}
}

// TestMemoryLabels: each source says what it is and what it cannot give.
func TestMemoryLabels(t *testing.T) {
	cases := []struct {
		src    ipc.MemSource
		header string
		na     []string
	}{
		{ipc.MemSource{Kind: "cuda", Peaks: "exact"}, "(cuda:0,", nil},
		{ipc.MemSource{Kind: "rocm", Peaks: "exact"}, "· ROCm", []string{"NVML is NVIDIA only"}},
		{ipc.MemSource{Kind: "xpu", Peaks: "counter"}, "Intel XPU", []string{"NVML is NVIDIA only"}},
		{ipc.MemSource{Kind: "mps", Peaks: "samples"}, "Apple MPS", []string{"a peak counter", "NVML is NVIDIA only"}},
		{ipc.MemSource{Kind: "cpu", Peaks: "process"}, "CPU · host memory (RSS)", []string{"lifetime peak"}},
		{ipc.MemSource{Kind: "cpu", Peaks: "none"}, "CPU · host memory (RSS)", []string{"no stdlib read of the RSS"}},
	}
	for _, c := range cases {
		r := Build(storeOf(withSource(generate(t, "warmup", 4), c.src), false))
		p := &r.Processes[0]
		if got := p.deviceLabel(); !strings.Contains(got, c.header) {
			t.Errorf("%s: header %q lacks %q", c.src.Kind, got, c.header)
		}
		na := strings.Join(p.Memory.NotAvailable, "; ")
		for _, w := range c.na {
			if !strings.Contains(na, w) {
				t.Errorf("%s: not available %q lacks %q", c.src.Kind, na, w)
			}
		}
		if c.na == nil && len(p.Memory.NotAvailable) != 0 {
			t.Errorf("cuda: %v", p.Memory.NotAvailable)
		}
	}
}

// TestHostTableMarksAFailedStep: a CPU run's table says, under the failed
// step's phases, that its update raised and the loop went on, as the
// allocator table's step line does.
func TestHostTableMarksAFailedStep(t *testing.T) {
	msgs := withSource(demo.Generate(mustScenario(t, "leak"), demo.Config{Steps: 12, Wall: wall, EveryPhase: true}),
		ipc.MemSource{Kind: ipc.SourceCPU, Peaks: ipc.PeaksExact})
	marked := false
	for i, m := range msgs {
		if m.Type == ipc.TypePhase && m.Name == "step" && m.Step == 5 && m.Edge == ipc.EdgeEnd && !m.User {
			msgs[i].Failed, marked = ipc.FailedError, true
		}
	}
	if !marked {
		t.Fatal("no step end at step 5")
	}
	var b bytes.Buffer
	if err := Build(storeOf(msgs, false)).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !regexp.MustCompile(`\n +5  zero_grad .*\n(.*\n){3} +step .*\n +failed: an error the loop caught\n`).MatchString(text) ||
		strings.Count(text, "failed: an error") != 1 {
		t.Errorf("no mark under step 5:\n%s", text)
	}
}
