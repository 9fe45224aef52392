// Package demo plays simulated PyTorch training processes for `vramscope
// demo`: a goroutine per rank acts as the Python hook and speaks protocol v1
// over a real Unix socket, so the server, store, recorder, TUI and report run
// exactly as they do live. The message sequence itself comes from a pure,
// deterministic generator (Generate, NewGenerator) that tests use directly.
// The scenarios and their numbers are documented in docs/demo.md.
package demo

import (
	"fmt"
	"strings"
	"time"
)

// MiB is one mebibyte, the unit of every scenario table.
const MiB int64 = 1 << 20

// LeakPerStep is what the leak scenario leaks in every forward: allocated at
// every phase end, and every peak, grows by exactly this much per step.
const LeakPerStep = 12 * MiB

// RankOffset is added, times the rank, to every byte value of a rank (a
// rank-specific buffer), so the views can tell the ranks apart.
const RankOffset = 16 * MiB

// The simulated device every rank runs on (CUDA index 0). DeviceUUID is the
// one probe.SimulatedUUID and the protocol fixtures use, so the simulated
// NVML sampler matches the demo's ranks.
const (
	DeviceUUID        = "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f"
	DeviceName        = "NVIDIA A100-SXM4-80GB"
	DeviceTotal int64 = 80 << 30
)

// PIDBase is the fake pid of rank 0; rank r has pid PIDBase+r.
const PIDBase = 4242

// DefaultScenario is the scenario Lookup returns for an empty name.
const DefaultScenario = "warmup"

// Virtual phase durations, and the input gap (batch fetch) before each step.
const (
	inputGap    = 9 * time.Millisecond
	durZeroGrad = 4 * time.Millisecond
	durForward  = 120 * time.Millisecond
	durLoss     = 12 * time.Millisecond
	durBackward = 230 * time.Millisecond
	durStep     = 35 * time.Millisecond
)

// Where in its phase a transient tops, as a fraction of the phase: forward
// peaks late (the last layers' activations and the logits), backward early
// (gradients are allocated while most activations are still alive).
const (
	forwardPeakAt  = 0.85
	backwardPeakAt = 0.35
)

// phaseNames are the automatic phases of one step, in order.
var phaseNames = [5]string{"zero_grad", "forward", "loss", "backward", "step"}

var phaseDurs = [5]time.Duration{durZeroGrad, durForward, durLoss, durBackward, durStep}

var phasePeakAt = [5]float64{0.5, forwardPeakAt, 0.5, backwardPeakAt, 0.5}

// phaseSpec is what one phase does to the allocator: the values at its end
// and the transient top of allocated inside it.
type phaseSpec struct {
	alloc    int64 // allocated at the end
	peak     int64 // transient top of allocated; none when ≤ max(begin, end)
	reserved int64 // reserved at the end
}

// plan is one step's five phases, in phaseNames order.
type plan [5]phaseSpec

// Scenario is one simulated training run. Get one with Lookup; the zero
// Scenario behaves as the default one.
type Scenario struct {
	// Name is what `--scenario` takes.
	Name string
	// Summary says in one line what the scenario shows.
	Summary string

	initAlloc, initReserved int64 // allocator before step 0
	weights, optimizer      int64 // anatomy: parameters, Adam state
	steps                   func(step int) plan
}

// mib builds a phaseSpec from MiB values.
func mib(alloc, peak, reserved int64) phaseSpec {
	return phaseSpec{alloc: alloc * MiB, peak: peak * MiB, reserved: reserved * MiB}
}

// The measured seq2seq + Adam run (docs/demo.md). Step 0 creates the
// gradients and Adam's state, step 1's backward finds a new high with both in
// place, and from step 2 on nothing grows.
var (
	warmupStep0 = plan{mib(281, 0, 284), mib(2108, 2154, 2178), mib(2566, 0, 2635), mib(1020, 3482, 3551), mib(1581, 0, 3551)}
	warmupStep1 = plan{mib(1581, 0, 3551), mib(2955, 3001, 3552), mib(3413, 0, 3552), mib(1581, 4329, 4468), mib(1581, 0, 4468)}
	warmupLater = plan{mib(1581, 0, 4468), mib(2955, 3001, 4468), mib(3413, 0, 4468), mib(1581, 4329, 4468), mib(1581, 0, 4468)}
	// steady starts where warmup settles: the cache grows in step 0 only.
	steadyStep0 = plan{mib(1581, 0, 1584), mib(2955, 3001, 3552), mib(3413, 0, 3552), mib(1581, 4329, 4468), mib(1581, 0, 4468)}
)

var scenarios = []Scenario{
	{
		Name:      "warmup",
		Summary:   "seq2seq + Adam as measured: max allocated jumps in steps 0 and 1, then levels off",
		initAlloc: 281 * MiB, initReserved: 284 * MiB,
		weights: 281 * MiB, optimizer: (1581 - 1020) * MiB,
		steps: func(step int) plan {
			switch step {
			case 0:
				return warmupStep0
			case 1:
				return warmupStep1
			}
			return warmupLater
		},
	},
	{
		Name:      "steady",
		Summary:   "no warmup (optimizer state and gradients loaded): every step has the same peaks",
		initAlloc: 1581 * MiB, initReserved: 1584 * MiB,
		weights: 281 * MiB, optimizer: (1581 - 1020) * MiB,
		steps: steadySteps,
	},
	{
		Name:      "leak",
		Summary:   fmt.Sprintf("steady plus a leak of %d MiB in every forward: the peaks keep growing", LeakPerStep/MiB),
		initAlloc: 1581 * MiB, initReserved: 1584 * MiB,
		weights: 281 * MiB, optimizer: (1581 - 1020) * MiB,
		steps: leakSteps,
	},
}

func steadySteps(step int) plan {
	if step == 0 {
		return steadyStep0
	}
	return warmupLater
}

// leakSteps is steady with LeakPerStep more allocated (and reserved) after
// every forward: zero_grad of step s carries s leaks, the other phases s+1.
func leakSteps(step int) plan {
	p := steadySteps(step)
	for i := range p {
		n := int64(step) + 1
		if i == 0 {
			n = int64(step)
		}
		p[i].alloc += n * LeakPerStep
		p[i].peak += n * LeakPerStep
		p[i].reserved += n * LeakPerStep
	}
	return p
}

// Scenarios returns the names of the built-in scenarios, the default first.
func Scenarios() []string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the scenario called name; an empty name is the default
// (DefaultScenario). An unknown name is an error that lists the valid ones.
func Lookup(name string) (Scenario, error) {
	if name == "" {
		name = DefaultScenario
	}
	for _, s := range scenarios {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (valid: %s)", name, strings.Join(Scenarios(), ", "))
}

// orDefault turns the zero Scenario into the default one.
func (sc Scenario) orDefault() Scenario {
	if sc.steps == nil {
		return scenarios[0]
	}
	return sc
}
