package diagnose

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

func TestLayersAtThePeak(t *testing.T) {
	// The warmup's peak is in backward of step 1; the anatomy of step 1
	// counts 281 MiB weights and gradients, 561 MiB optimizer state and the
	// activations of its forward (allocated at loss end − at zero_grad end).
	acts := mibs(3413 - 1581)
	cases := []struct {
		name       string
		nvml       bool
		nonPyTorch session.Bytes
		others     session.Bytes
		deviceUsed session.Bytes
	}{
		{"no NVML", false, session.Unknown, session.Unknown, session.Unknown},
		{"NVML", true, testContext, testOtherBytes, mibs(4468) + testContext + testOtherBytes},
	}
	for _, c := range cases {
		s, p := storeOf(t, demoMessages(t, "warmup", 6), c.nvml)
		l := LayersOf(s, p).Peak
		want := Layers{
			Step: 1, Phase: "backward", Allocated: mibs(4329), Reserved: mibs(4468),
			Weights: mibs(281), Gradients: mibs(281), Optimizer: mibs(561), Activations: acts,
			Other: mibs(4329-281-281-561) - acts, Cache: mibs(4468 - 4329),
			NonPyTorch: c.nonPyTorch, OtherProcesses: c.others, DeviceUsed: c.deviceUsed,
			ProcessUsed: session.Unknown, Transient: mibs(4329 - 281 - 281 - 561),
			ActivationsNote: "measured at step 1, batch 32", ActivationsBrief: "step 1, batch 32",
		}
		if c.nvml {
			want.ProcessUsed = mibs(4468) + testContext
		}
		if l != want {
			t.Errorf("%s: peak layers\n%+v, want\n%+v", c.name, l, want)
		}
		if big, ok := l.Largest(); !ok || big.Name != "activations" || big.Bytes != acts {
			t.Errorf("%s: largest %+v", c.name, big)
		}
	}
}

func TestLayersNow(t *testing.T) {
	cases := []struct {
		name string
		// cut ends the stream just after the first message matching it.
		cut        func(m *ipc.Message) bool
		nvml       bool
		phase      string
		allocated  session.Bytes
		acts       session.Bytes
		nonPyTorch session.Bytes
	}{
		{"mid-backward of step 2", func(m *ipc.Message) bool {
			return m.Step == 2 && m.Name == "backward" && m.Edge == ipc.EdgeBegin
		}, true, "backward", mibs(3413), mibs(3413 - 1581), testContext},
		{"after the run", nil, false, "step", mibs(1581), 0, session.Unknown},
	}
	for _, c := range cases {
		msgs := demoMessages(t, "warmup", 6)
		for i := range msgs {
			if c.cut != nil && c.cut(&msgs[i]) {
				msgs = msgs[:i+1]
				break
			}
		}
		s, p := storeOf(t, msgs, c.nvml)
		l := LayersOf(s, p).Now
		if l.Phase != c.phase || l.Allocated != c.allocated || l.Activations != c.acts || l.NonPyTorch != c.nonPyTorch {
			t.Errorf("%s: now %+v", c.name, l)
		}
		if want := gap(l.Allocated-l.Weights-l.Gradients-l.Optimizer-l.Activations, 0); l.Other != want {
			t.Errorf("%s: other %d, want %d", c.name, l.Other, want)
		}
	}
}

func TestLayersOnACPURunAreUnknown(t *testing.T) {
	s, p := storeOf(t, cpuRun(demoMessages(t, "warmup", 6)), false)
	b := LayersOf(s, p)
	for _, l := range []Layers{b.Now, b.Peak} {
		for _, v := range []session.Bytes{l.Allocated, l.Reserved, l.Cache, l.Other, l.NonPyTorch, l.OtherProcesses, l.ProcessUsed, l.DeviceUsed} {
			if v.Known() {
				t.Errorf("allocator or driver layer known on a CPU run: %+v", l)
			}
		}
	}
	// The hook's accounting works without CUDA.
	if b.Now.Weights != mibs(281) || b.Now.Optimizer != mibs(561) {
		t.Errorf("tensor layers %+v", b.Now)
	}
	if b.Peak.Step != -1 || b.Peak.Weights.Known() {
		t.Errorf("a CPU run has no allocated peak: %+v", b.Peak)
	}
}

// A per-process NVML reading taken during the peak's phase but before the
// allocator grew (the 1 Hz list lags) is below the reserved bytes at the
// peak. The driver counts every reserved byte, so such a reading cannot be
// "at peak": it is marked stale instead (NVML at peak 4546 MiB
// under reserved at peak 4702 MiB on the H100).
func TestNVMLBelowReservedIsNotAtPeak(t *testing.T) {
	msgs := demoMessages(t, "warmup", 6)
	evs := events(msgs, true)
	for i := range evs {
		if g := evs[i].GPU; g != nil {
			// Each reading is one 64 MiB segment behind the allocator.
			g.Processes[0].Used -= testContext + 64*session.MiB
		}
	}
	s := session.New()
	s.ApplyAll(evs)
	l := LayersOf(s, s.Processes()[0]).Peak
	if l.ProcessUsed.Known() || !l.ProcessUsedStale {
		t.Fatalf("process reading %s MiB under reserved %s MiB shown at the peak (stale %v)",
			l.ProcessUsed.MiBString(), l.Reserved.MiBString(), l.ProcessUsedStale)
	}
}

// No activations of the watched model exist in an evaluation (no_grad) nor
// between two steps: a peak there is never theirs.
func TestActivationsLiveOnlyWhereTrainingSavesThem(t *testing.T) {
	for phase, want := range map[string]bool{
		"forward": true, "loss": true, "backward": true, "checkpoint": true, "": true,
		"zero_grad": false, "step": false, session.EvalPhase: false, session.BetweenPhase: false,
	} {
		if got := activationsLive(phase); got != want {
			t.Errorf("activationsLive(%q) = %v, want %v", phase, got, want)
		}
	}
}
