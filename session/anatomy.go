package session

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Layers is one process's memory split by what holds it, at one moment.
// Every layer is Unknown where its source is missing: the allocator layers
// on a CPU run, the driver layers without NVML, the tensor layers before the
// hook's first anatomy message. docs/diagnosis.md describes each layer.
type Layers struct {
	// Step and Phase say when: the automatic phase in progress, or the last
	// one that ended, for "now"; where the session peak happened for "at
	// the peak". Step is -1 and Phase "" when unknown.
	Step  int    `json:"step"`
	Phase string `json:"phase"`
	// Allocated and Reserved are the allocator's figures: current values
	// for "now", the phase's peaks for "at the peak".
	Allocated Bytes `json:"allocated"`
	Reserved  Bytes `json:"reserved"`
	// Weights, Gradients and Optimizer come from the hook's anatomy (the
	// newest one measured at or before Step).
	Weights   Bytes `json:"weights"`
	Gradients Bytes `json:"gradients"`
	Optimizer Bytes `json:"optimizer"`
	// Activations are the bytes saved for backward in the last measured
	// forward. They live from forward to backward: in any other automatic
	// phase (zero_grad, step) they count as 0.
	Activations Bytes `json:"activations"`
	// Other is what the allocator holds beyond the accounted parts:
	// temporaries, the loss, inputs, workspaces the allocator serves.
	// Allocated − weights − gradients − optimizer − activations, never below
	// 0 (the parts can overlap, e.g. tied weights measured twice).
	Other Bytes `json:"other"`
	// Cache is the allocator's cache: reserved − allocated.
	Cache Bytes `json:"cache"`
	// NonPyTorch is what the driver charges the process beyond the
	// allocator: CUDA context, loaded kernels, cuBLAS/NCCL workspaces.
	// NVML process used − reserved, never below 0.
	NonPyTorch Bytes `json:"non_pytorch"`
	// OtherProcesses is the rest of the device: NVML device used − this
	// process's NVML figure, never below 0.
	OtherProcesses Bytes `json:"other_processes"`
	// ProcessUsed and DeviceUsed are the driver's figures behind the last
	// two layers (Unknown without NVML, or when per-process memory is not
	// visible for ProcessUsed).
	ProcessUsed Bytes `json:"process_used"`
	DeviceUsed  Bytes `json:"device_used"`
	// ProcessUsedStale is true at the peak when no per-process reading (1
	// Hz) was taken during the peak's phase: ProcessUsed is then Unknown,
	// and DeviceUsed (10 Hz, all processes) bounds it from above.
	ProcessUsedStale bool `json:"process_used_stale"`

	// ActivationsNote says how fresh Activations is: "measured at step 2,
	// batch 1024", "...; scaled ×128 (estimate)", or "stale: ...". ""
	// without a measurement.
	ActivationsNote string `json:"activations_note"`
	// ActivationsBrief is the note in a few words, for narrow panels:
	// "step 2, batch 80", "×128 of step 2 (est.)", "stale (step 2)".
	ActivationsBrief string `json:"-"`
	// ActivationsStale is true when the last measurement belongs to
	// another input size and nothing says how to scale it: Activations and
	// Other are then Unknown and Transient holds their sum.
	ActivationsStale bool `json:"activations_stale"`
	// Transient is activations + other/temporaries: allocated − weights −
	// gradients − optimizer state, never below 0; Unknown without them.
	Transient Bytes `json:"activations_and_temporaries"`
}

// Layer is one named layer of a Layers, for views that list them.
type Layer struct {
	Name  string
	Bytes Bytes
}

// List returns the layers in display order: the allocated parts, then the
// cache, the process's non-PyTorch memory and the other processes.
func (l *Layers) List() []Layer {
	return []Layer{
		{"weights", l.Weights}, {"gradients", l.Gradients}, {"optimizer state", l.Optimizer},
		{"activations", l.Activations}, {"other/temporaries", l.Other},
		{"allocator cache", l.Cache}, {"non-PyTorch", l.NonPyTorch}, {"other processes", l.OtherProcesses},
	}
}

// Largest returns the largest of the allocated parts (weights, gradients,
// optimizer state, activations, other), the one that dominates Allocated.
// ok is false when none is known.
func (l *Layers) Largest() (Layer, bool) {
	best, ok := Layer{}, false
	parts := l.List()[:5]
	if l.ActivationsStale {
		parts = append(parts, Layer{TransientName, l.Transient})
	}
	for _, x := range parts {
		if x.Bytes.Known() && (!ok || x.Bytes > best.Bytes) {
			best, ok = x, true
		}
	}
	return best, ok
}

// TransientName names activations and temporaries together, the layer
// Largest reports when the activations figure is stale.
const TransientName = "activations+temporaries"

// Breakdown is a process's layers now and at its session peak.
type Breakdown struct {
	Now  Layers `json:"now"`
	Peak Layers `json:"peak"`
}

// LayersOf splits a process's memory into layers, now and at the session
// peak (the phase with the largest allocated peak; the first one on a tie).
func LayersOf(s *Store, p *Process) Breakdown {
	return Breakdown{Now: layersNow(s, p), Peak: layersAtPeak(s, p, findPeak(p))}
}

func unknownLayers() Layers {
	return Layers{
		Step: -1, Allocated: Unknown, Reserved: Unknown,
		Weights: Unknown, Gradients: Unknown, Optimizer: Unknown, Activations: Unknown,
		Other: Unknown, Cache: Unknown, NonPyTorch: Unknown, OtherProcesses: Unknown,
		ProcessUsed: Unknown, DeviceUsed: Unknown, Transient: Unknown,
	}
}

func layersNow(s *Store, p *Process) Layers {
	l := unknownLayers()
	for k := len(p.open) - 1; k >= 0; k-- {
		if sp := &p.spans[p.open[k]]; !sp.User {
			l.Step, l.Phase = sp.Step, sp.Name
			break
		}
	}
	for k := len(p.spans) - 1; l.Step < 0 && k >= 0; k-- {
		if sp := &p.spans[k]; !sp.User {
			l.Step, l.Phase = sp.Step, sp.Name // between phases: the last one
		}
	}
	if m := p.Mem; m != nil {
		l.Allocated, l.Reserved = Bytes(m.Allocated), Bytes(m.Reserved)
	}
	if at, v, ok := p.GPU.Last(); ok {
		switch p.GPUSource {
		case "process":
			// The process list is read at 1 Hz: compare it with the device
			// and the allocator as they were when it was read.
			l.ProcessUsed = Bytes(v)
			if g := s.GPUFor(p); g != nil {
				l.DeviceUsed = inEffect(g.Used, at)
			}
			if _, gap, ok := p.NonPyTorch.Last(); ok {
				l.NonPyTorch = Bytes(gap)
			}
			if _, others, ok := p.Others.Last(); ok {
				l.OtherProcesses = Bytes(others)
			}
		case "device":
			l.DeviceUsed = Bytes(v)
		}
	}
	l.fill(anatomyAt(p, l.Step))
	p.freshen(&l, anatomyAt(p, l.Step))
	return l
}

func layersAtPeak(s *Store, p *Process, pk peakAt) Layers {
	l := unknownLayers()
	if !pk.ok {
		return l
	}
	l.Step, l.Phase = pk.step, pk.phase
	l.Allocated, l.Reserved = pk.allocated, pk.reserved
	switch p.GPUSource {
	case "process":
		// Only a reading taken during the peak's phase is a figure at the
		// peak; one from before it is not (the process list is read at 1
		// Hz, a phase often lasts less).
		if v, ok := p.GPU.MaxBetween(pk.from, pk.to); ok && !pk.from.IsZero() {
			l.ProcessUsed = Bytes(v)
		} else {
			l.ProcessUsedStale = true
		}
		if g := s.GPUFor(p); g != nil && !pk.from.IsZero() {
			if v, ok := g.Used.MaxBetween(pk.from, pk.to); ok {
				l.DeviceUsed = Bytes(v)
			}
		}
		if !pk.from.IsZero() {
			// The figures of the process-list readings in effect during the
			// peak's phase: each pairs values read at one moment.
			l.NonPyTorch = peakInEffect(p.NonPyTorch, pk.from, pk.to)
			l.OtherProcesses = peakInEffect(p.Others, pk.from, pk.to)
		}
	case "device":
		l.DeviceUsed = pk.gpu
	}
	l.fill(anatomyAt(p, l.Step))
	p.freshen(&l, anatomyAt(p, l.Step))
	return l
}

// fill derives the tensor layers from an anatomy and the gaps between the
// allocator's and the driver's figures.
func (l *Layers) fill(a *Anatomy) {
	l.Cache = gap(l.Reserved, l.Allocated)
	if a == nil {
		return
	}
	l.Weights, l.Gradients, l.Optimizer, l.Activations = a.Weights, a.Gradients, a.Optimizer, a.Activations
	if l.Activations.Known() && !activationsLive(l.Phase) {
		l.Activations = 0
	}
	if !l.Allocated.Known() {
		return
	}
	l.Transient = max(l.Allocated-l.Weights-l.Gradients-l.Optimizer, 0)
	if l.Activations.Known() {
		l.Other = max(l.Transient-l.Activations, 0)
	}
}

// activationsLive reports whether a phase runs while the tensors saved for
// backward exist. Unknown and user phases count as live: the figure is kept.
func activationsLive(phase string) bool {
	return phase != "zero_grad" && phase != "step"
}

// gap is a − b, never below 0, Unknown when either side is.
func gap(a, b Bytes) Bytes {
	d := a.Sub(b)
	if !d.Known() && a.Known() && b.Known() {
		return 0 // a < b: the two figures were read at different moments
	}
	return d
}

// anatomyAt returns the newest anatomy measured at or before step, the
// first one when all are later, nil when there is none.
func anatomyAt(p *Process, step int) *Anatomy {
	if len(p.Anatomies) == 0 {
		return nil
	}
	if step < 0 {
		return p.Anatomy
	}
	for k := len(p.Anatomies) - 1; k >= 0; k-- {
		if p.Anatomies[k].Step <= step {
			return &p.Anatomies[k]
		}
	}
	return &p.Anatomies[0]
}

// peakInEffect is the largest value of a series in effect during [from, to]:
// the point before from, and those inside.
func peakInEffect(s *Series, from, to time.Time) Bytes {
	v := inEffect(s, from)
	if m, ok := s.MaxBetween(from, to); ok {
		v = v.Max(Bytes(m))
	}
	return v
}

// freshen says how fresh the activations figure is at the layers' step and
// scales or withdraws it when it belongs to another input size: scaled by
// the input-size ratio when the hook reported both sizes (tokens when both
// are known, else the batch), withdrawn (stale) when it did not and the
// step's peak shows the input changed.
func (p *Process) freshen(l *Layers, a *Anatomy) {
	if a == nil || !a.Activations.Known() {
		return
	}
	note := fmt.Sprintf("measured at step %d", a.ActivationsStep)
	if a.ActivationsBatch > 0 {
		note += fmt.Sprintf(", batch %d", a.ActivationsBatch)
	}
	if a.ActivationsTokens > 0 {
		note += fmt.Sprintf(", %d tokens", a.ActivationsTokens)
	}
	if a.ActivationsSource == "scaled" {
		if r, ok := ratio(a.Tokens, a.ActivationsTokens, a.BatchSize.int64(), a.ActivationsBatch); ok {
			note += fmt.Sprintf("; scaled ×%s by the hook (estimate)", ratioString(r))
		} else {
			note += "; scaled by the hook (estimate)"
		}
	}
	l.ActivationsNote = note
	l.ActivationsBrief = fmt.Sprintf("step %d", a.ActivationsStep)
	if a.ActivationsBatch > 0 {
		l.ActivationsBrief += fmt.Sprintf(", batch %d", a.ActivationsBatch)
	}
	if a.ActivationsSource == "scaled" {
		l.ActivationsBrief = "scaled from " + l.ActivationsBrief + " (est.)"
	}
	live := activationsLive(l.Phase)
	if l.Step < 0 || l.Step == a.ActivationsStep || !live {
		return
	}
	batch, tokens := p.inputOf(l.Step)
	if batch > 0 || tokens > 0 {
		mt, mb := a.ActivationsTokens, a.ActivationsBatch
		if a.ActivationsSource == "scaled" { // the figure is already at the anatomy's size
			mt, mb = a.Tokens, a.BatchSize.int64()
		}
		if r, ok := ratio(tokens, mt, batch, mb); ok {
			if r != 1 {
				l.Activations = Bytes(math.Round(float64(a.Activations) * r))
				l.ActivationsNote = note + fmt.Sprintf("; scaled ×%s to step %d's input (estimate)", ratioString(r), l.Step)
				l.ActivationsBrief = fmt.Sprintf("×%s of step %d (est.)", ratioString(r), a.ActivationsStep)
				if l.Transient.Known() {
					l.Other = max(l.Transient-l.Activations, 0)
				}
			}
			return
		}
	}
	if p.Inputs || !l.Allocated.Known() {
		return
	}
	// An older hook reports no input size: the measurement holds only as
	// long as the step peaks stay where they were when it was made.
	then, _ := p.peakOfStep(a.ActivationsStep)
	now, running := p.peakOfStep(l.Step)
	if !then.Known() || !now.Known() || absDiff(now, then) <= Tolerance(then) || running && now < then {
		return // (a step still running has not reached its peak yet)
	}
	l.ActivationsStale = true
	l.ActivationsBrief = fmt.Sprintf("stale (step %d)", a.ActivationsStep)
	l.ActivationsNote = "stale: " + note + fmt.Sprintf("; step %d peaks %s MiB above step %d", l.Step, now.Sub(then).MiBString(), a.ActivationsStep)
	if now < then {
		l.ActivationsNote = "stale: " + note + fmt.Sprintf("; step %d peaks %s MiB below step %d", l.Step, then.Sub(now).MiBString(), a.ActivationsStep)
	}
	l.Activations, l.Other = Unknown, Unknown
}

// ratio is the input-size ratio now/then: tokens when both are known, else
// the batch; ok is false when neither pair is.
func ratio(tokens, mTokens, batch, mBatch int64) (float64, bool) {
	switch {
	case tokens > 0 && mTokens > 0:
		return float64(tokens) / float64(mTokens), true
	case batch > 0 && mBatch > 0:
		return float64(batch) / float64(mBatch), true
	}
	return 0, false
}

// ratioString prints a ratio with at most two decimals: 128, 1.5, 0.25.
func ratioString(r float64) string {
	return strconv.FormatFloat(math.Round(r*100)/100, 'f', -1, 64)
}

// inputOf is the input size of a step: its table row's, else the open
// forward's; -1 when unknown.
func (p *Process) inputOf(step int) (batch, tokens int64) {
	batch, tokens = -1, -1
	if st := p.stepRow(step); st != nil {
		batch, tokens = st.Batch, st.Tokens
	}
	for k := len(p.spans) - 1; k >= 0 && k >= len(p.spans)-8; k-- {
		if sp := &p.spans[k]; sp.Step == step && !sp.User {
			batch, tokens = max(batch, sp.Batch), max(tokens, sp.Tokens)
		}
	}
	return batch, tokens
}

// peakOfStep is a step's training peak from the per-step summaries and the
// open phases' peaks, Unknown when unknown; running is true while the step
// has an open phase (its peak so far is a lower bound).
func (p *Process) peakOfStep(step int) (v Bytes, running bool) {
	v = Unknown
	for k := len(p.peaks) - 1; k >= 0; k-- {
		if p.peaks[k].Index == step {
			v = p.peaks[k].PeakAllocated
			break
		}
	}
	for _, i := range p.open {
		if sp := &p.spans[i]; sp.Step == step && !sp.User {
			v, running = v.Max(sp.PeakAllocated), true
		}
	}
	return v, running
}

// ActivationsBrief is one short line for a narrow panel: how fresh the
// activations are at the peak (and now, when that differs in kind), ""
// without a measurement.
func ActivationsBrief(b Breakdown) string {
	now, peak := b.Now.ActivationsBrief, b.Peak.ActivationsBrief
	switch {
	case peak == "" && now == "":
		return ""
	case peak == "" || peak == now:
		return "activations: " + now
	case now == "" || !b.Now.ActivationsStale && !b.Peak.ActivationsStale && !strings.Contains(peak+now, "×"):
		return "activations at peak: " + peak
	}
	return "activations: " + now + "; at peak " + peak
}

// ActivationsNotes are the lines that say how fresh the activations figure
// is, now and at the peak ("activations at peak: stale: measured at step
// 2, batch 1024; ..."); one line when both say the same, none without a
// measurement.
func ActivationsNotes(b Breakdown) []string {
	now, peak := b.Now.ActivationsNote, b.Peak.ActivationsNote
	switch {
	case now == "" && peak == "":
		return nil
	case now == peak:
		return []string{"activations: " + now}
	case now == "":
		return []string{"activations at peak: " + peak}
	case peak == "":
		return []string{"activations now: " + now}
	}
	return []string{"activations now: " + now, "activations at peak: " + peak}
}
