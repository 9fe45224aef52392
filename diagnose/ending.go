package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// The flight recorder's thresholds; docs/diagnosis.md explains them.
const (
	// NearTotal is the share of the device's memory that reserved memory
	// must reach to count as "near the device total".
	NearTotal = 0.95
	// LastSeconds is how far back the flight recorder looks.
	LastSeconds = 5 * time.Second
)

// Ending is how a process ended and, when it ended abruptly, what the
// last seconds before it show: the flight recorder.
type Ending struct {
	// Goodbye is true when the hook said goodbye, Reason its reason.
	Goodbye bool   `json:"goodbye"`
	Reason  string `json:"reason"`
	// Abrupt is true without a goodbye, on reason "error", or mid-step.
	Abrupt bool `json:"abrupt"`
	// Step and Phase are where it ended (-1, "" between steps); PhaseNote
	// explains a phase name the hook's recording gets wrong.
	Step      int    `json:"step"`
	Phase     string `json:"phase"`
	PhaseNote string `json:"phase_note,omitempty"`
	// LikelyOOM is true when Evidence shows the allocator ran out of
	// memory: the hook's oom report, OOMs or retries counted in the last
	// step, reserved near the device total.
	LikelyOOM bool     `json:"likely_oom"`
	Evidence  []string `json:"evidence"`
	// WindowS is how many seconds the figures below cover, up to the end.
	WindowS float64 `json:"window_s"`
	// AllocatedBefore is allocated WindowS before the end, AllocatedPeak
	// the highest since, Allocated and Reserved the last snapshot.
	AllocatedBefore session.Bytes `json:"allocated_before"`
	AllocatedPeak   session.Bytes `json:"allocated_peak"`
	Allocated       session.Bytes `json:"allocated"`
	Reserved        session.Bytes `json:"reserved"`
	// Fragmentation is reserved − allocated at the end: cached, free, but
	// in blocks the failed allocation may not fit.
	Fragmentation session.Bytes `json:"fragmentation"`
	// Requested is what the failed allocation asked for (hook's oom report).
	Requested session.Bytes `json:"requested"`
	// OOMStep and OOMPhase are where the hook's oom report came from (-1
	// and "" without one); Survived is true when the process went on after
	// it (the error was caught).
	OOMStep     int           `json:"oom_step"`
	OOMPhase    string        `json:"oom_phase"`
	Survived    bool          `json:"survived_oom"`
	DeviceTotal session.Bytes `json:"device_total"`
	// Allowed is what this process's allocator may reserve when that is
	// below DeviceTotal (torch.cuda.set_per_process_memory_fraction: the
	// maximum torch's out-of-memory report gave), Unknown otherwise.
	Allowed session.Bytes `json:"allowed"`
	// Grew lists what grew in the unfinished step, phase by phase.
	Grew []string `json:"grew"`
	// Expandable is true when fragmentation is large enough for
	// expandable_segments to matter.
	Expandable bool `json:"expandable_segments"`
	// InputRatio is the dying step's input (tokens, else batch, as the
	// hook reported it) over the largest of the finished steps', 0 when
	// not larger or not known; Input and SteadyInput are the two, in
	// InputUnit. Bound is the least the dying step needed (the most it
	// held plus the allocation that failed), a lower bound; SteadyNeed the
	// need of the finished steps, beside it.
	InputRatio  float64       `json:"input_ratio"`
	Input       int64         `json:"input"`
	SteadyInput int64         `json:"steady_input"`
	InputUnit   string        `json:"input_unit"`
	Bound       session.Bytes `json:"bound"`
	SteadyNeed  session.Bytes `json:"steady_need"`
}

// inputCause names a larger input as the cause of an out-of-memory end:
// the dying step's input against the finished steps' largest, and what
// each needed side by side (the need, and the dying step's lower bound).
func (e *Ending) inputCause(p *session.Process, need session.Bytes) {
	if e == nil || !e.Abrupt || !e.LikelyOOM || e.Step < 0 {
		return
	}
	var dying *session.StepPeak
	var steadyTok, steadyBatch int64 = -1, -1
	for i := range p.StepPeaks() {
		sp := &p.StepPeaks()[i]
		if sp.Index == e.Step {
			dying = sp
			continue
		}
		steadyTok, steadyBatch = max(steadyTok, sp.Tokens), max(steadyBatch, sp.Batch)
	}
	if dying == nil {
		return
	}
	in, steady, unit := dying.Tokens, steadyTok, "tokens"
	if in <= 0 || steady <= 0 {
		in, steady, unit = dying.Batch, steadyBatch, "samples"
	}
	if in <= 0 || steady <= 0 || in <= steady {
		return
	}
	e.InputRatio, e.Input, e.SteadyInput, e.InputUnit = float64(in)/float64(steady), in, steady, unit
	e.SteadyNeed = need
	e.Bound = dying.Bound.Max(e.AllocatedPeak)
	if e.Requested.Known() && e.Allocated.Known() {
		e.Bound = e.Bound.Max(e.Allocated + e.Requested)
	}
}

// ending reads how the process ended. nil while it runs without an oom.
func ending(s *session.Store, p *session.Process) *Ending {
	e := p.End
	if e == nil && p.OOM == nil {
		return nil
	}
	out := &Ending{Step: -1, OOMStep: -1, AllocatedBefore: session.Unknown, AllocatedPeak: session.Unknown, Allocated: session.Unknown,
		Reserved: session.Unknown, Fragmentation: session.Unknown, Requested: session.Unknown, DeviceTotal: session.Unknown,
		Allowed: session.Unknown, Evidence: []string{}, Grew: []string{},
		Bound: session.Unknown, SteadyNeed: session.Unknown}
	end := p.Last
	if e != nil {
		out.Goodbye, out.Reason, out.Abrupt, out.Step, out.Phase = e.Goodbye, e.Reason, e.Abrupt, e.Step, e.Phase
		end = e.At
	}
	if o := p.OOM; o != nil {
		// An out-of-memory error a process survives (caught and retried
		// with a smaller batch, as HF's find_executable_batch_size does) is
		// not its end: it only explains an end that follows it.
		out.Survived = e == nil || !e.Abrupt
		if !out.Survived {
			out.Step, out.Phase = o.Step, o.Phase
		}
		out.OOMStep, out.OOMPhase, out.Requested = o.Step, o.Phase, o.Requested
		line := "the hook caught torch's out-of-memory error"
		if o.Requested.Known() {
			line += " (an allocation of " + o.Requested.MiBString() + " MiB failed)"
		}
		out.Evidence = append(out.Evidence, line)
		if out.Survived {
			out.LikelyOOM = true
			return out
		}
	}
	out.DeviceTotal = deviceTotal(s, p)
	out.Allowed = allowedMaximum(p, out.DeviceTotal)
	if m := p.Mem; m != nil {
		out.Allocated, out.Reserved = session.Bytes(m.Allocated), session.Bytes(m.Reserved)
		out.Fragmentation = gap(out.Reserved, out.Allocated)
	}
	from := end.Add(-LastSeconds)
	if first, _, ok := p.Allocated.First(); ok && first.After(from) {
		from = first
	}
	out.WindowS = end.Sub(from).Seconds()
	out.AllocatedBefore = session.InEffect(p.Allocated, from)
	if v, ok := p.Allocated.MaxBetween(from, end); ok {
		out.AllocatedPeak = session.Bytes(v)
	}
	if !out.Abrupt {
		return out // a clean exit: nothing to explain
	}
	oomEvidence(p, out)
	out.LikelyOOM = len(out.Evidence) > 0
	if out.Phase == "loss" && !p.Inputs && out.LikelyOOM {
		// An older hook begins backward only when the gradient reaches the
		// model's output, so its loss phase holds the start of backward;
		// an allocation that fails there is backward's.
		out.Phase = "backward"
		out.PhaseNote = "recorded as loss: this hook marks backward only when the gradient reaches the model's output"
	}
	out.Grew = grewIn(p, out.Step)
	if out.LikelyOOM && out.Reserved.Known() && out.Fragmentation.Known() {
		frag, ok := shareOf(out.Fragmentation, out.Reserved)
		out.Expandable = ok && frag >= CacheShare || out.Requested.Known() && out.Fragmentation >= out.Requested
	}
	return out
}

// oomEvidence lists what says the process ran out of memory.
func oomEvidence(p *session.Process, out *Ending) {
	m := p.Mem
	if m == nil {
		return
	}
	before := memBefore(p, out.Step)
	if before != nil && m.OOMs > before.OOMs {
		out.Evidence = append(out.Evidence, fmt.Sprintf("the allocator counted %d out-of-memory error(s) in step %d", m.OOMs-before.OOMs, out.Step))
	}
	if before != nil && m.AllocRetries > before.AllocRetries {
		out.Evidence = append(out.Evidence, fmt.Sprintf("the allocator retried %d time(s) in step %d (freed its cache and called cudaMalloc again)", m.AllocRetries-before.AllocRetries, out.Step))
	}
	if share, ok := shareOf(out.Reserved, out.Allowed); ok && share >= NearTotal {
		out.Evidence = append(out.Evidence, fmt.Sprintf("reserved %s MiB = %.0f%% of the %s MiB this process may reserve (%s)",
			out.Reserved.MiBString(), 100*share, out.Allowed.MiBString(), FractionWords))
	} else if share, ok := shareOf(out.Reserved, out.DeviceTotal); ok && share >= NearTotal {
		out.Evidence = append(out.Evidence, fmt.Sprintf("reserved %s MiB = %.0f%% of the device's %s MiB", out.Reserved.MiBString(), 100*share, out.DeviceTotal.MiBString()))
	}
}

// FractionWords names the setting behind an allowed maximum below the device.
const FractionWords = "torch.cuda.set_per_process_memory_fraction"

// deviceTotal is the device's memory: hello.cuda.total, else NVML's.
func deviceTotal(s *session.Store, p *session.Process) session.Bytes {
	if c := p.Hello.CUDA; c != nil && c.Total > 0 {
		return session.Bytes(c.Total)
	}
	if g := s.GPUFor(p); g != nil {
		return g.Total
	}
	return session.Unknown
}

// allowedMaximum is what the process's caching allocator may reserve when
// torch's out-of-memory report says it is below the device's total (torch
// passes its observers the allowed maximum in place of the total when a
// memory fraction is set); Unknown otherwise.
func allowedMaximum(p *session.Process, total session.Bytes) session.Bytes {
	if o := p.OOM; o != nil && o.DeviceTotal.Known() && o.DeviceTotal > 0 && total.Known() &&
		o.DeviceTotal < total-Tolerance(total) {
		return o.DeviceTotal
	}
	return session.Unknown
}

// memBefore is the allocator snapshot at the start of a step (its first
// span still kept; an earlier one when the step has none), nil when none.
func memBefore(p *session.Process, step int) *ipc.Mem {
	var at *ipc.Mem
	if step < 0 {
		return nil
	}
	for k := len(p.Spans()) - 1; k >= 0; k-- {
		sp := &p.Spans()[k]
		if sp.Step < step && at != nil {
			break // spans are in time order: the step's first one is found
		}
		if sp.Begin.Taken {
			at = &sp.Begin.Mem
		}
	}
	return at
}

// grewIn lists how much each phase of a step allocated above its start,
// ended phases and the open ones: "forward +67584 MiB (batch 131072)".
func grewIn(p *session.Process, step int) []string {
	if step < 0 {
		return []string{}
	}
	var out []string
	seen := map[string]bool{}
	first := len(p.Spans())
	for first > 0 && p.Spans()[first-1].Step >= step {
		first--
	}
	for k := first; k < len(p.Spans()); k++ {
		sp := &p.Spans()[k]
		if sp.Step != step || sp.User || !sp.Begin.Taken || seen[sp.Name] {
			continue
		}
		seen[sp.Name] = true
		peak := sp.PeakAllocated
		if sp.Open() && p.Mem != nil {
			peak = peak.Max(session.Bytes(p.Mem.Allocated))
		}
		d := gap(peak, session.Bytes(sp.Begin.Allocated))
		if d < session.MiB {
			continue
		}
		line := fmt.Sprintf("%s +%s MiB (%s → %s MiB)", sp.Name, d.MiBString(), session.Bytes(sp.Begin.Allocated).MiBString(), peak.MiBString())
		if sp.Batch > 0 {
			line += fmt.Sprintf(", batch %d", sp.Batch)
		}
		out = append(out, line)
	}
	if out == nil {
		return []string{}
	}
	return slices.Clip(out)
}

// Lines are the flight recorder's lines for an abrupt end.
func (e *Ending) Lines() []string {
	if e != nil && e.Survived {
		return []string{"out of memory in " + Where(e.OOMStep, e.OOMPhase) + ", caught: the run went on · " + strings.Join(e.Evidence, "; ")}
	}
	if e == nil || !e.Abrupt {
		return nil
	}
	head := "ended abruptly in " + Where(e.Step, e.Phase)
	if e.Step < 0 {
		head = "ended abruptly between steps"
	}
	switch {
	case e.Reason == "error":
		head += " (uncaught exception)"
	case !e.Goodbye:
		head += " (no goodbye: the process was killed or crashed)"
	}
	if e.LikelyOOM {
		head += ": likely out of memory"
	}
	lines := []string{head}
	if e.PhaseNote != "" {
		lines = append(lines, "  "+e.PhaseNote)
	}
	if len(e.Evidence) > 0 {
		lines = append(lines, "  because "+strings.Join(e.Evidence, "; "))
	}
	if e.InputRatio > 0 {
		lines = append(lines, fmt.Sprintf("  cause: step %d's input is %.1f× the finished steps' (%d %s against %d): it needed ≥ %s MiB (not exact), the finished steps %s MiB",
			e.Step, e.InputRatio, e.Input, e.InputUnit, e.SteadyInput, e.Bound.MiBString(), e.SteadyNeed.MiBString()))
	}
	if e.AllocatedBefore.Known() && e.AllocatedPeak.Known() {
		lines = append(lines, fmt.Sprintf("  last %.1f s: allocated %s → %s MiB", e.WindowS, e.AllocatedBefore.MiBString(), e.AllocatedPeak.MiBString()))
	}
	if len(e.Grew) > 0 {
		lines = append(lines, fmt.Sprintf("  step %d grew in: %s", e.Step, strings.Join(e.Grew, "; ")))
	}
	if e.Fragmentation.Known() && e.LikelyOOM {
		line := fmt.Sprintf("  fragmentation (reserved − allocated) at the end: %s MiB", e.Fragmentation.MiBString())
		if e.Expandable {
			line += " → PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the cache serve it"
		} else {
			if e.Allowed.Known() {
				line += fmt.Sprintf(": not the cause — the step needs more memory than this process may reserve (%s MiB of the device's %s MiB: %s; a larger fraction, a smaller batch, activation checkpointing)",
					e.Allowed.MiBString(), e.DeviceTotal.MiBString(), FractionWords)
			} else {
				line += ": not the cause — the step needs more memory than the device has (smaller batch, activation checkpointing)"
			}
		}
		lines = append(lines, line)
	}
	return lines
}
