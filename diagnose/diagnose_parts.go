package diagnose

import (
	"fmt"
	"math"
	"time"

	"github.com/vramscope/vramscope/session"
)

// causes separates the first step's growth: optimizer state created in its
// step phase, and, for a warmup, the growth of the allocator cache and of
// the memory outside PyTorch from the first step to the steady state.
func causes(p *session.Process, d *Diagnosis, pk, steady []session.StepPeak) Causes {
	c := Causes{Step: -1, OptimizerCreated: session.Unknown, OptimizerAnatomy: session.Unknown, CacheGrowth: session.Unknown, NonPyTorchGrowth: session.Unknown}
	if len(p.Steps()) > 0 {
		st := p.Steps()[0]
		c.Step = st.Index
		if start, cell := stepPhase(st); cell != nil {
			c.OptimizerCreated = gap(cell.AllocatedEnd, start)
		}
		if a := anatomyAt(p, st.Index); a != nil {
			c.OptimizerAnatomy = a.Optimizer
		}
		if c.OptimizerCreated.Known() && c.OptimizerAnatomy > 0 {
			diff := math.Abs(float64(c.OptimizerCreated - c.OptimizerAnatomy))
			c.OptimizerMatched = diff <= OptimizerMatch*float64(c.OptimizerAnatomy)
		}
	}
	if d.Pattern != PatternWarmup {
		return c
	}
	first := pk[0]
	alloc, reserved, _ := maxOf(steady)
	c.CacheGrowth = gap(reserved.Sub(alloc), first.PeakReserved.Sub(first.PeakAllocated))
	if p.GPUSource == "process" && len(steady) > 0 {
		// Each non-PyTorch figure pairs one process reading with the
		// reserved memory at that moment: compare the first step's with
		// the steady state's.
		last := steady[len(steady)-1]
		before := peakInEffect(p.NonPyTorch, first.Start, first.Start.Add(first.Duration))
		after := peakInEffect(p.NonPyTorch, steady[0].Start, last.Start.Add(last.Duration))
		c.NonPyTorchGrowth = gap(after, before)
	}
	return c
}

// stepPhase returns a step's "step" cell and allocated at its start: the
// end of the automatic phase before it. start is Unknown when there is none.
func stepPhase(st *session.Step) (start session.Bytes, cell *session.Cell) {
	start = session.Unknown
	for i := range st.Phases {
		c := &st.Phases[i]
		if c.User {
			continue
		}
		if c.Name == "step" {
			return start, c
		}
		start = c.AllocatedEnd
	}
	return session.Unknown, nil
}

// spike measures the optimizer step of the newest finished step in the
// table.
func spike(p *session.Process, last int) OptimizerSpike {
	o := OptimizerSpike{Step: -1, Start: session.Unknown, Peak: session.Unknown, Bytes: session.Unknown}
	for k := len(p.Steps()) - 1; k >= 0; k-- {
		st := p.Steps()[k]
		if st.Index > last {
			continue
		}
		start, cell := stepPhase(st)
		if cell == nil || !start.Known() {
			continue
		}
		o.Step, o.Start, o.Peak, o.Exact = st.Index, start, cell.PeakAllocated, cell.Exact
		o.Bytes = gap(cell.PeakAllocated, start)
		o.Reported = o.Bytes >= OptimizerSpikeMin
		break
	}
	return o
}

// need works out the memory the run needs (the steady peak when there is
// one), the headroom on its device and the largest batch that may fit.
func need(s *session.Store, p *session.Process, d *Diagnosis, tail []session.StepPeak) Need {
	n := Need{Allocated: session.Unknown, Reserved: session.Unknown, DeviceTotal: session.Unknown, Used: session.Unknown, Headroom: session.Unknown, AllocatedKnown: unknownKnown}
	if len(tail) == 0 {
		return n
	}
	n.AllocatedKnown = d.PeakAfterKnown
	n.Steady = d.Pattern == PatternSteady || d.Pattern == PatternWarmup
	n.Allocated, n.Reserved, _ = maxOf(tail)
	if c := p.Hello.CUDA; c != nil && c.Total > 0 {
		n.DeviceTotal = session.Bytes(c.Total)
	} else if g := s.GPUFor(p); g != nil {
		n.DeviceTotal = g.Total
	}
	// Headroom comes from the newest readings taken while the process ran:
	// the device's (10 Hz), and the steady reserved peak plus the newest
	// non-PyTorch and other-process figures (each a 1 Hz process reading
	// paired with what was reserved when it was taken). A process reading
	// from before the peak is never used as the peak.
	if g := s.GPUFor(p); g != nil {
		if at, ok := lastBefore(g.Used, p.Last); ok {
			n.Used, n.UsedBasis = at, "NVML device used (all processes), newest reading while it ran"
		}
	}
	if p.GPUSource == "process" && n.Reserved.Known() {
		if np, others := d.Layers.Now.NonPyTorch, d.Layers.Now.OtherProcesses; np.Known() && others.Known() {
			if v := n.Reserved + np + others; v > n.Used {
				n.Used, n.UsedBasis = v, "reserved peak plus non-PyTorch and other processes (newest NVML)"
			}
		}
	}
	if !n.Used.Known() && n.Reserved.Known() {
		n.Used, n.UsedBasis = n.Reserved, "peak reserved; without NVML the CUDA context and other processes are not counted"
	}
	n.Headroom = gap(n.DeviceTotal, n.Used)
	// A growing run has no batch that fits for good; a need that is only a
	// lower bound gives no estimate.
	if n.Steady && n.AllocatedKnown.Is.Stated() {
		n.Batch = batch(p, n.Headroom, n.UsedBasis)
	}
	return n
}

// lastBefore is a series' value in effect at t, ok false when unknown.
func lastBefore(s *session.Series, t time.Time) (session.Bytes, bool) {
	v, ok := s.At(t)
	return session.Bytes(v), ok
}

// BatchCapFactor caps the batch estimate: beyond this multiple of the
// measured batch the linear assumption is untested, and temporaries,
// the cache and kernel workspaces grow too.
const BatchCapFactor = 8

// batch estimates the largest batch that fits in the headroom, assuming
// activations scale linearly with the batch size.
func batch(p *session.Process, headroom session.Bytes, basis string) *BatchEstimate {
	a := p.Anatomy
	if a == nil || !headroom.Known() || a.Activations <= 0 || a.ActivationsBatch <= 0 || a.ActivationsSource == "scaled" {
		return nil
	}
	mb := session.Bytes(a.ActivationsBatch)
	per := a.Activations / mb
	if per <= 0 {
		return nil
	}
	most, capped := int64(mb+headroom/per), false
	if most > BatchCapFactor*a.ActivationsBatch {
		most, capped = BatchCapFactor*a.ActivationsBatch, true
	}
	return &BatchEstimate{
		Current: a.ActivationsBatch, Max: most, PerSample: per, Capped: capped,
		Assumes: BatchAssumptions,
	}
}

// BatchAssumptions are what every batch estimate assumes, the same for
// every process: views print them once (the report at its end, the
// diagnosis page under its lines). The measured figure and the headroom's
// basis are in the estimate's and the need's own lines.
var BatchAssumptions = []string{
	"activations scale linearly with batch size (the per-sample figure is the activations the hook measured, divided by that batch)",
	fmt.Sprintf("at most %d× the measured batch: the linear scaling is untested beyond it", BatchCapFactor),
	"weights, gradients and optimizer state do not depend on the batch",
	"temporaries and the allocator cache stay as they are (they grow too: keep a margin)",
	"headroom as the need line says (its basis in brackets)",
}

// advise lists the suggestions the measurements call for, each with the
// numbers behind it.
func advise(d *Diagnosis) []Advice {
	var out []Advice
	switch d.Pattern {
	case PatternGrowth:
		because := fmt.Sprintf("peak grows %s/step from step %d to %d (least-squares fit from the change point)", d.GrowthPerStep.Human(), d.GrowthFrom, d.GrowthTo)
		switch d.GrowthKind {
		case GrowthLeak:
			if d.HeldPerStep.Known() {
				because += fmt.Sprintf("; memory held between steps grows %s/step", d.HeldPerStep.Human())
			}
			out = append(out, Advice{
				Text:    fmt.Sprintf("look for tensors kept across steps since step %d (e.g. accumulating `loss` instead of `loss.item()`, lists of outputs, caches keyed by step)", d.GrowthFrom),
				Because: because,
			})
		default:
			if d.HeldFrom.Known() {
				because += fmt.Sprintf("; memory held between steps %s→%s MiB", d.HeldFrom.MiBString(), d.HeldTo.MiBString())
			}
			out = append(out, Advice{
				Text:    "cap the input size (batch, sequence length) at what fits: the peak follows it; activation checkpointing or gradient accumulation let a larger input fit",
				Because: because,
			})
		}
	case PatternWarmup:
		// Only when the first steps peaked above a steady peak that is
		// known: a warmup that rose to the steady need is that need.
		if d.PeakAfterKnown.Is.Stated() && d.WarmupPeak > d.PeakAfter+Tolerance(d.PeakAfter) {
			out = append(out, Advice{
				Text:    "nothing to fix: the first steps' peak is not a requirement, the steady peak is what matters",
				Because: fmt.Sprintf("step %d peaked at %s MiB, steady peak %s MiB since step %d", d.WarmupStep, d.WarmupPeak.MiBString(), d.PeakAfter.MiBString(), d.SteadyFrom),
			})
		}
	}
	if n := d.Need; n.PhaseName == session.EvalPhase && n.PhasePeak.Known() {
		out = append(out, Advice{
			Text: "the evaluation needs more than training: keep fewer of its outputs (reduce each batch's to what the metric needs), " +
				"run it under torch.inference_mode() or no_grad, and move what you keep to the CPU (.cpu()) as you go",
			Because: fmt.Sprintf("eval peaks at %s MiB, %s MiB above the training need of %s MiB", n.PhasePeak.MiBString(), (n.PhasePeak - n.Allocated).MiBString(), n.Allocated.MiBString()),
		})
	}
	pk := &d.Layers.Peak
	if share, ok := shareOf(d.Peak.DominantBytes, pk.Allocated); ok && share >= DominantShare {
		because := fmt.Sprintf("%s %s MiB = %.0f%% of the %s MiB peak (%s)", d.Peak.Dominant, d.Peak.DominantBytes.MiBString(), 100*share, pk.Allocated.MiBString(), d.Peak.Where())
		switch d.Peak.Dominant {
		case "activations", TransientName:
			if activationsLive(d.Peak.Phase) { // no activations exist in an evaluation
				out = append(out, Advice{Text: "activation checkpointing, or smaller micro-batches with gradient accumulation", Because: because})
			}
		case "optimizer state":
			out = append(out, Advice{Text: "lighter optimizer state (8-bit Adam, Adafactor) or shard it (ZeRO, FSDP)", Because: because})
		}
	}
	if o := d.Spike; o.Reported {
		w := d.Layers.Peak.Weights
		because := fmt.Sprintf("optimizer.step() peaks %s MiB above its start (step %d)", o.Bytes.MiBString(), o.Step)
		if w > 0 {
			because += fmt.Sprintf(" = %.1f× the weights", float64(o.Bytes)/float64(w))
		}
		out = append(out, Advice{
			Text: "the optimizer's foreach implementation (the CUDA default) makes temporaries for the whole model at once: " +
				"pass fused=True (Adam, AdamW, SGD: one kernel, no whole-model temporaries) or foreach=False (a per-parameter loop: temporaries of one parameter at a time, slower)",
			Because: because,
		})
	}
	if cache, ok := shareOf(pk.Cache, pk.Reserved); ok && d.AllocRetries > 0 && cache >= CacheShare {
		out = append(out, Advice{
			Text:    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to cut fragmentation",
			Because: fmt.Sprintf("%d allocator retries; cache %s MiB = %.0f%% of reserved at the peak", d.AllocRetries, pk.Cache.MiBString(), 100*cache),
		})
	}
	return out
}

// shareOf is part/whole; ok is false when either is unknown or whole is 0.
func shareOf(part, whole session.Bytes) (float64, bool) {
	if !part.Known() || !whole.Known() || whole == 0 {
		return 0, false
	}
	return float64(part) / float64(whole), true
}

// Where says where the session peak happened: its phase, one taken from
// the breakdown step a step read once repeats, or that it is not known.
func (pk PeakSite) Where() string {
	switch {
	case pk.Step >= 0 && pk.Phase == "":
		return fmt.Sprintf("step %d (its phase is not known)", pk.Step)
	case pk.PhaseAs >= 0:
		return fmt.Sprintf("%s (read once: the phases of step %d, which it repeats)", Where(pk.Step, pk.Phase), pk.PhaseAs)
	}
	return Where(pk.Step, pk.Phase)
}

// Where names a phase of a step: "backward of step 1", "optimizer step of
// step 1" (the phase called step), "step 1" without a phase, "–" without a
// step.
func Where(step int, phase string) string {
	switch {
	case step < 0:
		return "–"
	case phase == "":
		return fmt.Sprintf("step %d", step)
	case phase == "step":
		phase = "optimizer step"
	}
	return fmt.Sprintf("%s of step %d", phase, step)
}
