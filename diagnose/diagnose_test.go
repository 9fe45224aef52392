package diagnose

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

func TestDiagnosePatterns(t *testing.T) {
	cases := []struct {
		scenario   string
		steps      int
		pattern    Pattern
		steadyFrom int
		before     session.Bytes
		after      session.Bytes
		growth     session.Bytes
		headline   string
	}{
		{"warmup", 8, PatternWarmup, 2, mibs(3482), mibs(4329), session.Unknown,
			"warmup: step 1 +847 MiB over step 0: optimizer state +561, gradients kept +281, unexplained +5 MiB (3482→4329 MiB, backward of step 1); steady since step 2"},
		{"warmup", 2000, PatternWarmup, 2, mibs(3482), mibs(4329), session.Unknown,
			"warmup: step 1 +847 MiB over step 0: optimizer state +561, gradients kept +281, unexplained +5 MiB (3482→4329 MiB, backward of step 1); steady since step 2"},
		{"steady", 8, PatternSteady, 0, session.Unknown, mibs(4329), session.Unknown, "steady: peak 4329 MiB since step 0"},
		{"leak", 40, PatternGrowth, -1, session.Unknown, mibs(4329) + 40*session.Bytes(demo.LeakPerStep), session.Bytes(demo.LeakPerStep),
			"growth: peak +12 MiB/step from step 0 (steps 0–39) — possible leak: memory held between steps 1593→2061 MiB (+12 MiB/step)"},
		{"leak", 6, PatternGrowth, -1, session.Unknown, mibs(4329) + 6*session.Bytes(demo.LeakPerStep), session.Bytes(demo.LeakPerStep),
			"growth: peak +12 MiB/step from step 0 (steps 0–5) — possible leak: memory held between steps 1593→1653 MiB (+12 MiB/step)"},
		{"warmup", MinSteps, PatternWarmup, 2, mibs(3482), mibs(4329), session.Unknown,
			"warmup: step 1 +847 MiB over step 0: optimizer state +561, gradients kept +281, unexplained +5 MiB (3482→4329 MiB, backward of step 1); steady since step 2"},
		{"leak", MinSteps, PatternGrowth, -1, session.Unknown, mibs(4329) + MinSteps*session.Bytes(demo.LeakPerStep), session.Bytes(demo.LeakPerStep),
			"growth: peak +12 MiB/step from step 0 (steps 0–3) — possible leak: memory held between steps 1593→1629 MiB (+12 MiB/step)"},
	}
	for _, c := range cases {
		s, p := storeOf(t, demoMessages(t, c.scenario, c.steps), false)
		d := Diagnose(s, p)
		if d.Pattern != c.pattern || d.SteadyFrom != c.steadyFrom {
			t.Errorf("%s/%d: pattern %s from %d (%s), want %s from %d", c.scenario, c.steps, d.Pattern, d.SteadyFrom, d.Reason, c.pattern, c.steadyFrom)
		}
		if d.PeakBefore != c.before || d.PeakAfter != c.after || d.GrowthPerStep != c.growth {
			t.Errorf("%s/%d: peaks %d→%d growth %d, want %d→%d growth %d", c.scenario, c.steps, d.PeakBefore, d.PeakAfter, d.GrowthPerStep, c.before, c.after, c.growth)
		}
		if h := d.Headline(); h != c.headline {
			t.Errorf("%s/%d: headline\n%q, want\n%q", c.scenario, c.steps, h, c.headline)
		}
	}
}

func TestWarmupGrowthIsPlacedWhereItHappened(t *testing.T) {
	s, p := storeOf(t, demoMessages(t, "warmup", 6), false)
	d := Diagnose(s, p)
	if d.WarmupChange != 847*session.MiB || d.WarmupStep != 1 || d.WarmupPhase != "backward" {
		t.Fatalf("warmup change %d at step %d %q, want 847 MiB in backward of step 1", d.WarmupChange, d.WarmupStep, d.WarmupPhase)
	}
	if d.Peak.Step != 1 || d.Peak.Phase != "backward" || d.Peak.Allocated != mibs(4329) || !d.Peak.Exact {
		t.Fatalf("session peak %+v", d.Peak)
	}
	if !d.Need.Steady || d.Need.Allocated != mibs(4329) || d.Need.Reserved != mibs(4468) {
		t.Fatalf("need %+v", d.Need)
	}
}

func TestFirstStepsAboveTheSteadyStateAreWarmup(t *testing.T) {
	// Step 0 needs 2 GiB more once (cuDNN benchmarking), then the run
	// settles below it.
	msgs := demoMessages(t, "steady", 8)
	for i := range msgs {
		if m := &msgs[i]; m.Mem != nil && m.Step == 0 && m.Type == ipc.TypePhase && m.Name == "forward" && m.Edge == ipc.EdgeEnd {
			m.Mem.MaxAllocated += 2048 * session.MiB
		}
	}
	s, p := storeOf(t, msgs, false)
	d := Diagnose(s, p)
	want := "warmup: first steps peaked at 5049 MiB (forward of step 0), steady peak 4329 MiB since step 1"
	if d.Pattern != PatternWarmup || d.Headline() != want {
		t.Fatalf("%s: %q, want %q", d.Pattern, d.Headline(), want)
	}
}

func TestTooFewStepsIsUnknown(t *testing.T) {
	for steps := 0; steps < MinSteps; steps++ {
		s, p := storeOf(t, demoMessages(t, "warmup", steps), false)
		d := Diagnose(s, p)
		if d.Pattern != PatternUnknown || !strings.Contains(d.Reason, fmt.Sprintf("need %d", MinSteps)) {
			t.Errorf("%d steps: %s (%q)", steps, d.Pattern, d.Reason)
		}
	}
	// While connected, the newest step is still running and does not count.
	msgs := demoMessages(t, "warmup", MinSteps)
	s, p := storeOf(t, msgs[:len(msgs)-1], false) // no goodbye
	if d := Diagnose(s, p); d.Pattern != PatternUnknown || d.Steps != MinSteps-1 {
		t.Errorf("live run of %d steps: %s over %d steps", MinSteps, d.Pattern, d.Steps)
	}
	// During the very first step there is allocator data, only no finished
	// step yet: the reason must say so, not call it a CPU run.
	first := 0
	for i, m := range msgs {
		if m.Type == ipc.TypePhase && m.Name == "backward" {
			first = i
			break
		}
	}
	s, p = storeOf(t, msgs[:first], false)
	if d := Diagnose(s, p); !strings.Contains(d.Reason, fmt.Sprintf("need %d", MinSteps)) {
		t.Errorf("inside step 0: %q", d.Reason)
	}
	// A CPU run has no allocator data at all.
	s, p = storeOf(t, cpuRun(msgs[:first]), false)
	if d := Diagnose(s, p); !strings.Contains(d.Reason, "no allocator data") {
		t.Errorf("CPU run inside step 0: %q", d.Reason)
	}
}

func TestStepOneCauses(t *testing.T) {
	cases := []struct {
		name       string
		nvml       bool
		cache      session.Bytes
		nonPyTorch session.Bytes
	}{
		{"no NVML", false, mibs((4468 - 4329) - (3551 - 3482)), session.Unknown},
		// The simulated context is constant: NVML − reserved does not grow.
		{"NVML", true, mibs((4468 - 4329) - (3551 - 3482)), 0},
	}
	for _, c := range cases {
		s, p := storeOf(t, demoMessages(t, "warmup", 6), c.nvml)
		d := Diagnose(s, p)
		got := d.Causes
		if got.Step != 0 || got.OptimizerCreated != mibs(1581-1020) || got.OptimizerAnatomy != mibs(561) || !got.OptimizerMatched {
			t.Errorf("%s: optimizer %+v", c.name, got)
		}
		if got.CacheGrowth != c.cache || got.NonPyTorchGrowth != c.nonPyTorch {
			t.Errorf("%s: cache growth %d non-PyTorch %d, want %d %d", c.name, got.CacheGrowth, got.NonPyTorchGrowth, c.cache, c.nonPyTorch)
		}
		if !hasLine(d.Lines(), "step 0: optimizer step allocated 561 MiB: the optimizer state (anatomy: 561 MiB)") {
			t.Errorf("%s: lines %q", c.name, d.Lines())
		}
	}
}

func TestOptimizerSpike(t *testing.T) {
	cases := []struct {
		name     string
		extra    int64
		reported bool
	}{
		{"none", 0, false},
		{"below threshold", int64(OptimizerSpikeMin) - session.MiB, false},
		{"foreach temporaries", 300 * session.MiB, true},
	}
	for _, c := range cases {
		var msgs []ipc.Message
		var last *ipc.Mem // the newest read
		top := int64(0)   // the injected high inside the open step phase
		for _, m := range demoEveryPhase(t, "steady", 6) {
			if m.Type == ipc.TypePhase && m.Name == "step" && m.Edge == ipc.EdgeEnd && top > 0 {
				// An exact-peaks read covers the high since the read before.
				mem := *m.Mem
				mem.MaxAllocated, top = max(mem.MaxAllocated, top), 0
				m.Mem = &mem
			}
			msgs = append(msgs, m)
			if m.Mem != nil {
				last = m.Mem
			}
			if c.extra > 0 && m.Type == ipc.TypePhase && m.Name == "step" && m.Edge == ipc.EdgeBegin {
				s := *last
				s.Allocated += c.extra
				s.MaxAllocated = max(s.MaxAllocated, s.Allocated)
				top = s.Allocated
				msgs = append(msgs, ipc.Message{V: 1, Type: ipc.TypeSample, T: m.T, Mem: &s})
			}
		}
		s, p := storeOf(t, renumber(msgs), false)
		o := Diagnose(s, p).Spike
		if o.Step != 5 || o.Bytes != session.Bytes(c.extra) || o.Reported != c.reported || o.Start != mibs(1581) {
			t.Errorf("%s: spike %+v, want %d bytes reported=%v", c.name, o, c.extra, c.reported)
		}
	}
}

func TestAdviceComesWithItsMeasurement(t *testing.T) {
	retries := func(msgs []ipc.Message) []ipc.Message {
		for i := range msgs {
			if m := msgs[i].Mem; m != nil {
				m.Reserved += 2048 * session.MiB
				m.MaxReserved += 2048 * session.MiB
				m.AllocRetries = 3
			}
		}
		return msgs
	}
	noRetries := func(msgs []ipc.Message) []ipc.Message {
		for i := range msgs {
			if m := msgs[i].Mem; m != nil {
				m.Reserved += 2048 * session.MiB
				m.MaxReserved += 2048 * session.MiB
			}
		}
		return msgs
	}
	cases := []struct {
		name     string
		scenario string
		edit     func([]ipc.Message) []ipc.Message
		want     []string // substrings of the advice texts, in order
	}{
		// The demo's warmup rises to its steady peak: that peak is the need,
		// so "nothing to fix" would be wrong.
		{"warmup", "warmup", nil, []string{"activation checkpointing"}},
		{"steady", "steady", nil, []string{"activation checkpointing"}},
		{"leak", "leak", nil, []string{"tensors kept across steps", "activation checkpointing"}},
		{"big cache, no retries", "steady", noRetries, []string{"activation checkpointing"}},
		{"big cache with retries", "steady", retries, []string{"activation checkpointing", "expandable_segments"}},
		{"cpu", "steady", cpuRun, nil},
	}
	for _, c := range cases {
		msgs := demoMessages(t, c.scenario, 20)
		if c.edit != nil {
			msgs = c.edit(msgs)
		}
		s, p := storeOf(t, msgs, false)
		d := Diagnose(s, p)
		if len(d.Advice) != len(c.want) {
			t.Errorf("%s: %d advice %+v, want %q", c.name, len(d.Advice), d.Advice, c.want)
			continue
		}
		for i, a := range d.Advice {
			if !strings.Contains(a.Text, c.want[i]) || !strings.ContainsAny(a.Because, "0123456789") {
				t.Errorf("%s: advice %d = %+v, want %q with numbers", c.name, i, a, c.want[i])
			}
		}
	}
}

func TestNeedAndBatchEstimate(t *testing.T) {
	cases := []struct {
		name     string
		nvml     bool
		used     session.Bytes
		hasBatch bool
	}{
		{"no NVML", false, mibs(4468), true},
		{"NVML", true, mibs(4468) + testContext + testOtherBytes, true},
	}
	for _, c := range cases {
		s, p := storeOf(t, demoMessages(t, "warmup", 6), c.nvml)
		n := Diagnose(s, p).Need
		if n.Used != c.used || n.DeviceTotal != session.Bytes(demo.DeviceTotal) || n.Headroom != session.Bytes(demo.DeviceTotal)-c.used {
			t.Errorf("%s: need %+v", c.name, n)
		}
		a := p.Anatomy
		per := a.Activations / a.BatchSize
		// The headroom (80 GiB less ~5.5 GiB) would fit ~1300 samples of 57
		// MiB: far past what the measurement at batch 32 says anything
		// about, so the estimate stops at BatchCapFactor × 32 and says so.
		if fit := int64(a.BatchSize + n.Headroom/per); fit <= BatchCapFactor*int64(a.BatchSize) {
			t.Fatalf("%s: the case no longer exercises the cap (fit %d)", c.name, fit)
		}
		if n.Batch == nil || n.Batch.Current != int64(a.BatchSize) || n.Batch.Max != BatchCapFactor*int64(a.BatchSize) || !n.Batch.Capped || len(n.Batch.Assumes) == 0 {
			t.Errorf("%s: batch %+v", c.name, n.Batch)
		}
	}
	s, p := storeOf(t, cpuRun(demoMessages(t, "warmup", 6)), false)
	if n := Diagnose(s, p).Need; n.Batch != nil || n.Headroom.Known() || n.Allocated.Known() {
		t.Errorf("cpu run: need %+v", n)
	}
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

func BenchmarkDiagnose(b *testing.B) {
	s, p := storeOf(b, demoMessages(b, "warmup", 2000), true)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := Diagnose(s, p)
		if len(d.Headline()) == 0 || len(d.Lines()) == 0 {
			b.Fatal("empty diagnosis")
		}
	}
}
