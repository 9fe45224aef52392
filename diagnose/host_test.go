package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// hostRun turns a run into what a CPU run's hook sends (docs/hook.md,
// "Devices"): mem_source cpu, no device, allocated = reserved (the RSS).
func hostRun(msgs []ipc.Message) []ipc.Message {
	out := make([]ipc.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Mem != nil {
			mem := *m.Mem
			mem.Reserved, mem.MaxReserved = mem.Allocated, mem.MaxAllocated
			m.Mem = &mem
		}
		switch m.Type {
		case ipc.TypeHello:
			m.CUDA = nil
			m.MemSource = &ipc.MemSource{Kind: ipc.SourceCPU, Peaks: ipc.PeaksExact}
		case ipc.TypeAnatomy:
			m.Device = "cpu"
		}
		out = append(out, m)
	}
	return out
}

// TestHostLeakSpeaksOfHostMemory: the demo's leak as a CPU run is a leak of
// host memory with the same rate as on the GPU, and nothing measured
// against the allocator (the anatomy's parts, the optimizer's first step,
// the batch estimate, headroom) is said of it.
func TestHostLeakSpeaksOfHostMemory(t *testing.T) {
	msgs := withTokens(demoMessages(t, "leak", 40), func(int) int64 { return 4096 })
	_, gp := storeOf(t, msgs, false)
	s, p := storeOf(t, hostRun(msgs), false)
	gpu := Diagnose(s, gp)
	d := Diagnose(s, p)
	if d.Source != ipc.SourceCPU || gpu.Source != "" {
		t.Fatalf("source %q / %q", d.Source, gpu.Source)
	}
	if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak {
		t.Fatalf("pattern %s %s, want a leak", d.Pattern, d.GrowthKind)
	}
	if d.GrowthPerStep != gpu.GrowthPerStep || !d.HeldPerStep.Known() {
		t.Errorf("rate %v (GPU %v), held %v", d.GrowthPerStep, gpu.GrowthPerStep, d.HeldPerStep)
	}
	lines := d.Lines()
	if !strings.HasPrefix(lines[0], "host memory (RSS): growth: peak +") || !strings.HasPrefix(d.Headline(), "host memory (RSS): ") {
		t.Errorf("headline %q", lines[0])
	}
	text := strings.Join(lines, "\n")
	for _, no := range []string{"largest part", "optimizer step allocated", "reserved", "estimate: batch", "headroom", "expandable_segments"} {
		if strings.Contains(text, no) {
			t.Errorf("a CPU run's diagnosis says %q:\n%s", no, text)
		}
	}
	if len(d.Advice) != 1 || !strings.HasPrefix(d.Advice[0].Text, "look for objects kept across steps") {
		t.Errorf("advice %+v", d.Advice)
	}
	if !strings.Contains(text, "session peak RSS") {
		t.Errorf("no peak line:\n%s", text)
	}
}

// withTokens gives every training forward's begin an input of tokens(step)
// tokens (batch 8), as the hook reports an index input.
func withTokens(msgs []ipc.Message, tokens func(step int) int64) []ipc.Message {
	out := make([]ipc.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Type == ipc.TypePhase && m.Name == "forward" && m.Edge == ipc.EdgeBegin {
			b, n := int64(8), tokens(m.Step)
			m.Input = &ipc.Input{Batch: &b, Tokens: &n}
		}
		out = append(out, m)
	}
	return out
}

// Host memory needs its own evidence before the word leak: RSS does not
// fall back when the process keeps what it freed, so held RSS rises with a
// growing input as with a leak. The same rising run is a leak when the
// input stays the same, follows the input when that grows, and is not
// called a leak when the hook reported no input size.
func TestHostGrowthIsALeakOnlyWithFlatInputs(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens func(int) int64
		kind   string
		says   string
	}{
		{"flat input", func(int) int64 { return 4096 }, GrowthLeak, "possible leak"},
		{"context doubling every 10 steps", func(step int) int64 { return 512 << (step / 10) }, GrowthHostInput, "follows the input (512→"},
		{"no input sizes", nil, GrowthHostUnknown, "cannot be told from a leak"},
	} {
		msgs := demoMessages(t, "leak", 40)
		if c.tokens != nil {
			msgs = withTokens(msgs, c.tokens)
		}
		s, p := storeOf(t, hostRun(msgs), false)
		d := Diagnose(s, p)
		if d.Pattern != PatternGrowth || d.GrowthKind != c.kind || !strings.Contains(d.Headline(), c.says) {
			t.Errorf("%s: %s %s %q, want %s saying %q", c.name, d.Pattern, d.GrowthKind, d.Headline(), c.kind, c.says)
		}
		if c.kind != GrowthLeak && strings.Contains(d.Headline(), "possible leak") {
			t.Errorf("%s: %q", c.name, d.Headline())
		}
	}
}
