package diagnose

import (
	"fmt"
	"slices"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
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
	Allocated session.Bytes `json:"allocated"`
	Reserved  session.Bytes `json:"reserved"`
	// Weights, Gradients and Optimizer come from the hook's anatomy (the
	// newest one measured at or before Step).
	Weights   session.Bytes `json:"weights"`
	Gradients session.Bytes `json:"gradients"`
	Optimizer session.Bytes `json:"optimizer"`
	// Activations are the bytes saved for backward in the last measured
	// forward. They live from forward to backward: in any other automatic
	// phase (zero_grad, step) they count as 0.
	Activations session.Bytes `json:"activations"`
	// Other is what the allocator holds beyond the accounted parts:
	// temporaries, the loss, inputs, workspaces the allocator serves.
	// Allocated − weights − gradients − optimizer − activations, never below
	// 0 (the parts can overlap, e.g. tied weights measured twice).
	Other session.Bytes `json:"other"`
	// Cache is the allocator's cache: reserved − allocated.
	Cache session.Bytes `json:"cache"`
	// NonPyTorch is what the driver charges the process beyond the
	// allocator: CUDA context, loaded kernels, cuBLAS/NCCL workspaces.
	// NVML process used − reserved, never below 0.
	NonPyTorch session.Bytes `json:"non_pytorch"`
	// OtherProcesses is the rest of the device: NVML device used − this
	// process's NVML figure, never below 0.
	OtherProcesses session.Bytes `json:"other_processes"`
	// ProcessUsed and DeviceUsed are the driver's figures behind the last
	// two layers (Unknown without NVML, or when per-process memory is not
	// visible for ProcessUsed).
	ProcessUsed session.Bytes `json:"process_used"`
	DeviceUsed  session.Bytes `json:"device_used"`
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
	// ActivationsStale is true when the figure does not hold at this
	// moment: the last measurement belongs to another input size and
	// nothing says how to scale it, or ("now") a forward is under way, which
	// has saved part of a whole forward's. Activations and Other are then
	// Unknown and Transient holds their sum.
	ActivationsStale bool `json:"activations_stale"`
	// Host is true on a CPU run: the figures are the process's RSS, with
	// no allocator cache or driver view (List leaves those out).
	Host bool `json:"-"`
	// Transient is activations + other/temporaries: allocated − weights −
	// gradients − optimizer state, never below 0; Unknown without them.
	Transient session.Bytes `json:"activations_and_temporaries"`
}

// Layer is one named layer of a Layers, for views that list them.
type Layer struct {
	Name  string
	Bytes session.Bytes
}

// List returns the layers in display order: the allocated parts, then the
// cache, the process's non-PyTorch memory and the other processes.
func (l *Layers) List() []Layer {
	if l.Host {
		// Host memory has no allocator cache and no driver view: those
		// layers are left out, not shown as unknown; the rest of the RSS
		// is the interpreter, libraries and every other object.
		return []Layer{
			{"weights", l.Weights}, {"gradients", l.Gradients}, {"optimizer state", l.Optimizer},
			{"activations", l.Activations}, {hostWords.Rest, l.Other},
		}
	}
	return []Layer{
		{"weights", l.Weights}, {"gradients", l.Gradients}, {"optimizer state", l.Optimizer},
		{"activations", l.Activations}, {"other/temporaries", l.Other},
		{"allocator cache", l.Cache}, {"non-PyTorch", l.NonPyTorch}, {"other processes", l.OtherProcesses},
	}
}

// hostWords are the words of a CPU run's memory (ipc.SourceWords).
var hostWords, _ = ipc.WordsOf(ipc.SourceCPU)

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
func LayersOf(s *session.Store, p *session.Process) Breakdown {
	b := Breakdown{Now: layersNow(s, p), Peak: layersAtPeak(s, p, findPeak(p))}
	if p.HostRSS() {
		hostLayers(&b.Now)
		hostLayers(&b.Peak)
	}
	return b
}

func unknownLayers() Layers {
	return Layers{
		Step: -1, Allocated: session.Unknown, Reserved: session.Unknown,
		Weights: session.Unknown, Gradients: session.Unknown, Optimizer: session.Unknown, Activations: session.Unknown,
		Other: session.Unknown, Cache: session.Unknown, NonPyTorch: session.Unknown, OtherProcesses: session.Unknown,
		ProcessUsed: session.Unknown, DeviceUsed: session.Unknown, Transient: session.Unknown,
	}
}

func layersNow(s *session.Store, p *session.Process) Layers {
	l := unknownLayers()
	open := false
	for k := len(p.OpenSpans()) - 1; k >= 0; k-- {
		if sp := &p.Spans()[p.OpenSpans()[k]]; !sp.User {
			l.Step, l.Phase, open = sp.Step, sp.Name, true
			break
		}
	}
	for k := len(p.Spans()) - 1; l.Step < 0 && k >= 0; k-- {
		if sp := &p.Spans()[k]; !sp.User {
			l.Step, l.Phase = sp.Step, sp.Name // between phases: the last one
		}
	}
	if m := p.Mem; m != nil {
		l.Allocated, l.Reserved = session.Bytes(m.Allocated), session.Bytes(m.Reserved)
	}
	if at, v, ok := p.GPU.Last(); ok {
		switch p.GPUSource {
		case "process":
			// The process list is read at 1 Hz: compare it with the device
			// and the allocator as they were when it was read.
			l.ProcessUsed = session.Bytes(v)
			if g := s.GPUFor(p); g != nil {
				l.DeviceUsed = session.InEffect(g.Used, at)
			}
			if _, gap, ok := p.NonPyTorch.Last(); ok {
				l.NonPyTorch = session.Bytes(gap)
			}
			if _, others, ok := p.Others.Last(); ok {
				l.OtherProcesses = session.Bytes(others)
			}
		case "device":
			l.DeviceUsed = session.Bytes(v)
		}
	}
	l.fill(anatomyAt(p, l.Step))
	freshen(p, &l, anatomyAt(p, l.Step))
	l.gradientsFreed(p, open)
	if open && l.Phase == "forward" {
		l.forwardUnderWay()
	}
	if a := atOOM(p); a != nil {
		l.atOOM(p, a)
	}
	return l
}

// gradientsFreed sets the gradients to 0 after a zero_grad which frees
// them (set_to_none): the newest zero_grad that was read fell by the
// gradients' bytes, and the moment is that zero_grad's end (open false),
// or a forward or a loss that it precedes: in the phase order of the
// newest step that has the phase and a zero_grad, the last of zero_grad
// and backward before the phase (round the step: a zero_grad after the
// update frees them for the next step's forward) is the zero_grad.
// Lightning zeroes after training_step, so its forward keeps them; a
// set_to_none=False zero_grad frees nothing.
func (l *Layers) gradientsFreed(p *session.Process, open bool) {
	ended := l.Phase == "zero_grad" && !open
	if (l.Phase != "forward" && l.Phase != "loss" && !ended) || !l.Gradients.Known() || l.Gradients == 0 {
		return
	}
	var order []string
	freed, known := false, false
	steps := p.Steps()
	// The newest rows, then the first ones (zero_grad is read on steps 0-2
	// of a loop that zeroes first): the middle of a long table is skipped,
	// so a live frame walks a few dozen rows at most.
	for k := len(steps) - 1; k >= 0 && (order == nil || !known); k-- {
		if k == len(steps)-1-gradientRows && k >= gradientRows {
			k = gradientRows - 1
		}
		st := steps[k]
		var names []string
		has := false
		for i := range st.Phases {
			c := &st.Phases[i]
			if c.User {
				continue
			}
			names = append(names, c.Name)
			has = has || c.Name == l.Phase
			if c.Name != "zero_grad" || !c.Read || known {
				continue
			}
			before := session.Unknown
			if i > 0 && st.Phases[i-1].Read {
				before = st.Phases[i-1].AllocatedEnd
			} else if i == 0 && k > 0 {
				before = steps[k-1].Held
			}
			if before.Known() {
				freed, known = before-c.AllocatedEnd+Tolerance(l.Gradients) >= l.Gradients, true
			}
		}
		if order == nil && has && slices.Contains(names, "zero_grad") {
			order = names
		}
	}
	if !freed || order == nil {
		return
	}
	at := slices.Index(order, l.Phase)
	for j := 0; j < len(order); j++ {
		switch order[(at-j+len(order))%len(order)] {
		case "backward":
			return
		case "zero_grad":
			l.Gradients = 0
			l.rest()
			return
		}
	}
}

// gradientRows is how many of the newest and of the first step rows
// gradientsFreed looks at.
const gradientRows = 16

// forwardUnderWay withdraws the activations figure while a forward runs:
// it is a whole forward's, of which the part saved so far is alive. They
// are shown with the temporaries, as a stale figure is.
func (l *Layers) forwardUnderWay() {
	if !l.Activations.Known() || l.ActivationsStale {
		return
	}
	l.ActivationsStale = true
	l.ActivationsNote = "a forward is under way, part of a whole forward's " + l.Activations.MiBString() +
		" MiB (" + l.ActivationsNote + ")"
	l.ActivationsBrief = "forward under way"
	l.Activations, l.Other = session.Unknown, session.Unknown
}

// atOOM takes the tensor layers from the census at an out-of-memory error
// when nothing has moved since (the allocator's figure then is the newest):
// what was alive then, counted, in place of the measured anatomy, whose
// gradients zero_grad may have freed and whose activations are a whole
// forward's, not the part that ran before the error.
func (l *Layers) atOOM(p *session.Process, a *AtOOM) {
	al := a.Allocator
	if a.Step != l.Step || !a.Complete || al == nil || al.Allocated == nil || p.Mem == nil ||
		*al.Allocated != p.Mem.Allocated {
		return
	}
	l.Allocated = session.Bytes(*al.Allocated)
	l.Weights, l.Gradients, l.Optimizer, l.Activations = a.Weights, a.Gradients, a.Optimizer, a.SavedInGraphs
	l.rest()
	l.ActivationsStale = false
	l.ActivationsNote = fmt.Sprintf("saved in the autograd graphs alive at the out-of-memory error (the census of step %d)", a.Step)
	l.ActivationsBrief = "census at the OOM"
}

func layersAtPeak(s *session.Store, p *session.Process, pk peakAt) Layers {
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
		// Nor is one below the reserved bytes at the peak: the driver
		// counts every byte the allocator reserved, so a reading under that
		// was taken before the phase reached its peak.
		if v, ok := p.GPU.MaxBetween(pk.from, pk.to); ok && !pk.from.IsZero() &&
			(!pk.reserved.Known() || session.Bytes(v) >= pk.reserved) {
			l.ProcessUsed = session.Bytes(v)
		} else {
			l.ProcessUsedStale = true
		}
		if g := s.GPUFor(p); g != nil && !pk.from.IsZero() {
			if v, ok := g.Used.MaxBetween(pk.from, pk.to); ok {
				l.DeviceUsed = session.Bytes(v)
			}
		}
		if !pk.from.IsZero() && !l.ProcessUsedStale {
			// The figures of the process-list readings in effect during the
			// peak's phase: each pairs values read at one moment. With no
			// reading during the phase they come from a stale one and are
			// left out, as the process figure is ("non-PyTorch at
			// peak 480" stood beside "NVML process at peak: stale").
			l.NonPyTorch = peakInEffect(p.NonPyTorch, pk.from, pk.to)
			l.OtherProcesses = peakInEffect(p.Others, pk.from, pk.to)
		}
	case "device":
		l.DeviceUsed = pk.gpu
	}
	l.fill(anatomyAt(p, l.Step))
	freshen(p, &l, anatomyAt(p, l.Step))
	return l
}

// fill derives the tensor layers from an anatomy and the gaps between the
// allocator's and the driver's figures.
func (l *Layers) fill(a *session.Anatomy) {
	l.Cache = gap(l.Reserved, l.Allocated)
	if a == nil {
		return
	}
	l.Weights, l.Gradients, l.Optimizer, l.Activations = a.Weights, a.Gradients, a.Optimizer, a.Activations
	if l.Activations.Known() && !activationsLive(l.Phase) {
		l.Activations = 0
	}
	l.rest()
}

// rest derives Transient (allocated less weights, gradients and optimizer
// state) and Other (Transient less the activations, when known), never
// below 0; nothing without Allocated.
func (l *Layers) rest() {
	if !l.Allocated.Known() {
		return
	}
	l.Transient = max(l.Allocated-l.Weights-l.Gradients-l.Optimizer, 0)
	if l.Activations.Known() {
		l.Other = max(l.Transient-l.Activations, 0)
	}
}

// activationsLive reports whether a phase runs while the tensors saved for
// backward exist. Unknown and user phases count as live (the figure is
// kept), but evaluation (under no_grad nothing is saved for backward) and
// what ran between two steps (the last step's are freed, the next one's
// not made yet).
func activationsLive(phase string) bool {
	return phase != "zero_grad" && phase != "step" && phase != session.EvalPhase &&
		phase != session.BetweenPhase
}

// gap is a − b, never below 0, Unknown when either side is.
func gap(a, b session.Bytes) session.Bytes {
	d := a.Sub(b)
	if !d.Known() && a.Known() && b.Known() {
		return 0 // a < b: the two figures were read at different moments
	}
	return d
}

// anatomyAt returns the newest anatomy measured at or before step, the
// first one when all are later, nil when there is none.
func anatomyAt(p *session.Process, step int) *session.Anatomy {
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
func peakInEffect(s *session.Series, from, to time.Time) session.Bytes {
	v := session.InEffect(s, from)
	if m, ok := s.MaxBetween(from, to); ok {
		v = v.Max(session.Bytes(m))
	}
	return v
}
