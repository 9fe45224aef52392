package diagnose

import (
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// The thresholds of the diagnosis. docs/diagnosis.md explains each rule.
const (
	// SteadyMinSteps is how many finished steps without a new high make a
	// steady state: two steps at the same level have levelled off.
	SteadyMinSteps = 2
	// GrowthMinSteps is the fewest steps a growth fit is made over (a line
	// through two points says nothing about its noise).
	GrowthMinSteps = 3
	// MinSteps is the fewest finished steps a pattern is told from: a two
	// step warmup (gradients, then optimizer state) plus a steady state.
	MinSteps = 2 + SteadyMinSteps
	// LevelTolerance is the relative difference under which two step peaks
	// count as the same level; LevelToleranceMin is its floor in bytes.
	LevelTolerance                  = 0.005
	LevelToleranceMin session.Bytes = 4 * session.MiB
	// GrowthWindow is how many recent steps the growth fit looks at.
	GrowthWindow = 200
	// MinGrowthPerStep is the smallest slope called growth: below it a
	// leak would need more than 4,000 steps to cost 1 GiB.
	MinGrowthPerStep session.Bytes = 256 << 10
	// GrowthMinT is the t statistic the slope needs, over the window and
	// over its recent half, so noisy peaks (variable sequence lengths) are
	// not taken for a leak.
	GrowthMinT = 4.0
	// CauseMin is the smallest step-one cause (cache or non-PyTorch growth)
	// worth a line.
	CauseMin session.Bytes = 16 * session.MiB
	// OptimizerMatch is the relative difference under which the memory the
	// first optimizer step allocated is the optimizer state the hook counted.
	OptimizerMatch = 0.05
	// OptimizerSpikeMin is the smallest optimizer-step spike reported.
	OptimizerSpikeMin session.Bytes = 64 * session.MiB
	// DominantShare is the share of the peak a layer needs for advice aimed
	// at it.
	DominantShare = 0.40
	// CacheShare is the share of reserved memory the allocator cache needs,
	// with allocation retries, for the expandable_segments advice.
	CacheShare = 0.20
)

// Pattern is the shape of the step peaks over a session.
type Pattern string

// Patterns.
const (
	PatternUnknown Pattern = "unknown" // too few steps, or not settled yet
	PatternSteady  Pattern = "steady"  // every step peaks at the same level
	PatternWarmup  Pattern = "warmup"  // the first steps differ, then level
	PatternGrowth  Pattern = "growth"  // the peaks keep growing
)

// Diagnosis is what the step and phase series say about a process's memory.
// Byte fields are Unknown where their source is missing.
type Diagnosis struct {
	// Pattern is the shape of the step peaks; Reason says why it is
	// PatternUnknown.
	Pattern Pattern `json:"pattern"`
	Reason  string  `json:"reason,omitempty"`
	// Steps is the number of finished steps with allocator data that were
	// looked at, FirstStep and LastStep their indices (-1 when none).
	Steps     int `json:"steps"`
	FirstStep int `json:"first_step"`
	LastStep  int `json:"last_step"`
	// Turn is the steps of one turn of several watched models that take
	// turns (a GAN's D and G), each turn read as one step by the pattern,
	// the held memory and the need (turns); 0 when the steps are read one
	// by one.
	Turn int `json:"turn,omitempty"`
	// SteadyFrom is the first step of the steady state (steady, warmup),
	// the newest level's after a level change; -1 otherwise. WarmupEnd is
	// the first step after the warmup (steady, warmup; -1 otherwise): the
	// warmup is steps FirstStep to WarmupEnd−1, before any level change.
	SteadyFrom int `json:"steady_from"`
	WarmupEnd  int `json:"warmup_end"`
	// PeakBefore is the first step's allocated peak (warmup), PeakAfter the
	// steady peak (steady, warmup) or the newest high (growth, unknown).
	PeakBefore session.Bytes `json:"peak_before"`
	PeakAfter  session.Bytes `json:"peak_after"`
	// PeakAfterKnown says whether PeakAfter is exact, inferred from an
	// exact step, or a lower bound.
	PeakAfterKnown Known `json:"peak_after_known"`
	// WarmupChange is PeakAfter − PeakBefore in bytes (negative when the
	// first steps peaked above the steady state), 0 outside a warmup.
	WarmupChange int64 `json:"warmup_change"`
	// WarmupStep and WarmupPhase are where the warmup's defining peak
	// happened: the new high that the steady state keeps, or the first
	// steps' high that it never reaches again. -1 and "" otherwise.
	WarmupStep  int    `json:"warmup_step"`
	WarmupPhase string `json:"warmup_phase"`
	// WarmupPeak is the allocated peak of WarmupStep.
	WarmupPeak session.Bytes `json:"warmup_peak"`
	// warmupHigh: the first steps peaked above the level they settled at
	// (the first level, where the level changed later), never again.
	warmupHigh bool
	// GrowthPerStep is the least-squares slope of the step peaks over
	// GrowthFrom..GrowthTo (growth only).
	// GrowthFrom is the onset: the change point where the growth starts.
	GrowthPerStep session.Bytes `json:"growth_per_step"`
	GrowthFrom    int           `json:"growth_from"`
	GrowthTo      int           `json:"growth_to"`
	// GrowthKind says what grows (GrowthLeak, GrowthInput,
	// GrowthTransient), "" outside growth. HeldFrom and HeldTo are the
	// memory held between steps at the growing segment's first and last
	// steps, HeldPerStep its least-squares slope. PerInput is the peak's
	// bytes per InputUnit ("sample" or "token") for GrowthInput.
	GrowthKind  string        `json:"growth_kind"`
	HeldFrom    session.Bytes `json:"held_from"`
	HeldTo      session.Bytes `json:"held_to"`
	HeldPerStep session.Bytes `json:"held_per_step"`
	PerInput    session.Bytes `json:"per_input"`
	InputUnit   string        `json:"input_unit"`
	// Spread is the robust standard deviation of the step peaks' noise.
	Spread session.Bytes `json:"spread"`
	// Held is the memory held between steps over the finished steps (the
	// per-step series is in the report's steps).
	Held HeldSummary `json:"held_summary"`
	// Rise explains the warmup's high against the step before it (nil
	// outside a warmup that rises); FirstStep is the first step phase by
	// phase.
	Rise *WarmupRise `json:"warmup_rise"`
	// Levels are the rises to a new level after a steady stretch, oldest
	// first (levels.go); empty when none.
	Levels []LevelChange `json:"level_changes"`
	// Stairs: a leak (growth) that rises in stairs of held memory at a
	// regular pace, each as level changes would (heldStairs); nil otherwise.
	Stairs *Stairs `json:"stairs"`
	// InputFrom and InputTo are the input sizes (in InputUnit) at the start
	// and the end of a host-memory growth that follows the input
	// (GrowthHostInput); 0 otherwise.
	InputFrom      int64            `json:"input_from"`
	InputTo        int64            `json:"input_to"`
	FirstStepPhase []FirstStepPhase `json:"first_step_phases"`

	Peak   PeakSite       `json:"peak"`
	Causes Causes         `json:"causes"`
	Spike  OptimizerSpike `json:"optimizer_spike"`
	Need   Need           `json:"need"`
	Advice []Advice       `json:"advice"`

	// Layers are the process's layers, now and at the peak.
	Layers Breakdown `json:"-"`
	// End is how the process ended (the flight recorder), nil while it
	// runs; Phases are the user and evaluation phases, diagnosed on their
	// own.
	End    *Ending      `json:"end"`
	Phases []PhasePeaks `json:"user_phases"`
	// EvalGradStep is the last step after which the hook's evaluation ran a
	// forward of the model in eval mode with gradients enabled (no
	// torch.no_grad()), -1 when none did.
	EvalGradStep int `json:"eval_grad_step"`
	// Failed is the steps that failed while the process went on (a phase
	// raised and the loop caught the error), nil when none did.
	Failed *Failed `json:"failed_steps"`
	// Skipped is the steps that ran without an optimizer step, among those
	// the table holds, nil when none did.
	Skipped *Skipped `json:"skipped_steps"`
	// Source is "cpu" when the figures are the process's host memory
	// (RSS; the diagnosis then speaks of host memory), "" otherwise.
	Source string `json:"source,omitempty"`
	// AllocRetries is the allocator's retry count (cudaMalloc failed, the
	// cache was freed and the call retried), 0 on CPU runs.
	AllocRetries int64 `json:"alloc_retries"`
	// Culprits are the holders that grew between the hook's two newest
	// censuses (nil: fewer than two, or nothing grew).
	Culprits *Culprits `json:"culprits"`
	// AtOOM is what was alive at an out-of-memory error, by category (nil
	// when the hook sent no census there).
	AtOOM *AtOOM `json:"at_oom"`
}

// PeakSite is where the session's allocated peak happened and what
// dominates it.
type PeakSite struct {
	Step int `json:"step"` // -1 when no step has allocator data
	// Phase holds the peak; "" when not known (a step read once that
	// repeats no breakdown step in the table). PhaseAs is the step whose
	// phase it takes (the step read once repeats its phases), -1 when the
	// phase is the step's own.
	Phase   string `json:"phase"`
	PhaseAs int    `json:"phase_as"`
	// Allocated and Reserved are the phase's peaks.
	Allocated session.Bytes `json:"allocated"`
	Reserved  session.Bytes `json:"reserved"`
	// Exact is false when the allocated peak is a lower bound; Known says
	// how the step's peak is known (exact, inferred, bound).
	Exact bool  `json:"exact"`
	Known Known `json:"known"`
	// Dominant is the largest allocated layer at the peak ("" unknown).
	Dominant      string        `json:"dominant"`
	DominantBytes session.Bytes `json:"dominant_bytes"`
}

// Causes separates what made the first steps bigger.
type Causes struct {
	// Step is the first step in the table, -1 when none.
	Step int `json:"step"`
	// OptimizerCreated is the allocated growth across that step's "step"
	// phase (optimizer state created lazily by the first optimizer.step).
	OptimizerCreated session.Bytes `json:"optimizer_created"`
	// OptimizerAnatomy is the optimizer state the hook counted for it.
	OptimizerAnatomy session.Bytes `json:"optimizer_anatomy"`
	// OptimizerMatched is true when the two agree within OptimizerMatch.
	OptimizerMatched bool `json:"optimizer_matched"`
	// CacheGrowth is how much the allocator cache at the peak (peak
	// reserved − peak allocated) grew from the first step to the steady
	// state; NonPyTorchGrowth the same for NVML process used − reserved.
	// Warmup only.
	CacheGrowth      session.Bytes `json:"cache_growth"`
	NonPyTorchGrowth session.Bytes `json:"non_pytorch_growth"`
}

// OptimizerSpike is how far the newest finished step's "step" phase peaks
// above allocated at its start: temporaries of foreach/fused optimizers.
type OptimizerSpike struct {
	Step int `json:"step"` // -1 when no step phase is known
	// Start is allocated at the phase's start, Peak its allocated peak.
	Start session.Bytes `json:"start_allocated"`
	Peak  session.Bytes `json:"peak_allocated"`
	Bytes session.Bytes `json:"bytes"`
	Exact bool          `json:"exact"` // false: Peak is a lower bound
	// Reported is true when Bytes reaches OptimizerSpikeMin.
	Reported bool `json:"reported"`
}

// Need is the memory the training really needs and what is left.
type Need struct {
	// Steady is true when Allocated and Reserved are the steady state's
	// peaks; false when they are the highest seen (growth, unknown).
	Steady    bool          `json:"steady"`
	Allocated session.Bytes `json:"allocated"`
	// AllocatedKnown says whether Allocated is exact, inferred or a lower
	// bound (then the batch estimate is left out).
	AllocatedKnown Known         `json:"allocated_known"`
	Reserved       session.Bytes `json:"reserved"`
	// DeviceTotal is the device's memory (hello.cuda.total, else NVML).
	DeviceTotal session.Bytes `json:"device_total"`
	// Allowed is what the process's allocator may reserve when an
	// out-of-memory report showed it below DeviceTotal (a memory
	// fraction), Unknown otherwise.
	Allowed session.Bytes `json:"allowed"`
	// Used is the device memory in use at that peak and UsedBasis what it
	// was measured with; Headroom is DeviceTotal − Used, or Allowed − the
	// reserved peak under a memory fraction.
	Used      session.Bytes `json:"used"`
	UsedBasis string        `json:"used_basis"`
	Headroom  session.Bytes `json:"headroom"`
	// Batch is the largest batch estimated to fit, nil when unknown.
	Batch *BatchEstimate `json:"batch"`
	// PhasePeak is the highest peak of a user or evaluation phase when it
	// is above Allocated (the run needs it too), Unknown otherwise;
	// PhaseName names that phase.
	PhasePeak session.Bytes `json:"phase_peak"`
	PhaseName string        `json:"phase_name"`
}

// BatchEstimate is an estimate of the largest batch that fits.
type BatchEstimate struct {
	Current   int64         `json:"current"`
	Max       int64         `json:"max"`
	PerSample session.Bytes `json:"per_sample"`
	// Capped is true when Max is BatchCapFactor × Current, not the fit.
	Capped  bool     `json:"capped"`
	Assumes []string `json:"assumes"`
}

// Advice is one suggestion and the measurement that triggered it.
type Advice struct {
	Text    string `json:"text"`
	Because string `json:"because"`
}

// Diagnose reads a process's step peaks, table, anatomy and NVML figures.
// It is cheap enough to call every frame.
func Diagnose(s *session.Store, p *session.Process) Diagnosis {
	d := Diagnosis{
		Pattern: PatternUnknown, FirstStep: -1, LastStep: -1, SteadyFrom: -1, WarmupEnd: -1,
		PeakBefore: session.Unknown, PeakAfter: session.Unknown, WarmupStep: -1, WarmupPeak: session.Unknown, EvalGradStep: -1,
		GrowthPerStep: session.Unknown, GrowthFrom: -1, GrowthTo: -1,
		HeldFrom: session.Unknown, HeldTo: session.Unknown, HeldPerStep: session.Unknown, PerInput: session.Unknown, Spread: session.Unknown,
	}
	if p.Mem != nil {
		d.AllocRetries = p.Mem.AllocRetries
	}
	finished := finishedPeaks(p)
	pk, turn := turns(finished)
	d.Turn = turn
	tail := d.classify(p, pk)
	if d.Turn > 0 { // the steps read, not the turns' highest
		d.Steps, d.FirstStep, d.LastStep = len(finished), finished[0].Index, finished[len(finished)-1].Index
	}
	d.PeakAfterKnown = knownOf(tail)
	d.Held = heldOf(pk)
	pa := findPeak(p)
	d.Layers = Breakdown{Now: layersNow(s, p), Peak: layersAtPeak(s, p, pa)}
	d.Peak = PeakSite{Step: -1, PhaseAs: -1, Allocated: session.Unknown, Reserved: session.Unknown, DominantBytes: session.Unknown, Known: unknownKnown}
	if pa.ok {
		d.Peak = PeakSite{Step: pa.step, Phase: pa.phase, PhaseAs: pa.phaseAs, Allocated: pa.allocated, Reserved: pa.reserved, Exact: pa.exact, Known: pa.known, DominantBytes: session.Unknown}
		if l, ok := d.Layers.Peak.Largest(); ok {
			d.Peak.Dominant, d.Peak.DominantBytes = l.Name, l.Bytes
		}
	}
	d.End = ending(s, p)
	d.Phases = userPhases(p, d.PeakAfter)
	d.EvalGradStep = evalGradStep(p)
	d.Failed = failedSteps(p)
	d.Skipped = skippedSteps(p)
	d.Causes = causes(p, &d, pk, tail)
	d.Rise = warmupRise(p, &d, pk)
	d.FirstStepPhase = firstStepPhases(p)
	d.Spike = spike(p, d.LastStep)
	d.Need = need(s, p, &d, needSteps(&d, pk, tail))
	d.End.inputCause(p, d.Need.Allocated)
	d.Need.PhasePeak = session.Unknown
	for _, u := range d.Phases {
		if u.Peak > d.Need.Allocated && u.Peak > d.Need.PhasePeak && d.Need.Allocated.Known() {
			d.Need.PhasePeak, d.Need.PhaseName = u.Peak, u.Name
		}
	}
	d.Advice = advise(&d)
	if p.HostRSS() {
		d.Source = ipc.SourceCPU
		hostOnly(&d, tail)
	}
	// What holds tensors comes from the hook's tensor walk: true on every device.
	d.Advice = append(d.Advice, HoldersOf(p.Anatomy).Advice()...)
	d.Culprits = CulpritsOf(p)
	d.AtOOM = atOOM(p)
	return d
}
