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
	msgs := demoMessages(t, "leak", 40)
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
