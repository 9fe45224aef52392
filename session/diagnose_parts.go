package session

import (
	"fmt"
	"math"
)

// causes separates the first step's growth: optimizer state created in its
// step phase, and, for a warmup, the growth of the allocator cache and of
// the memory outside PyTorch from the first step to the steady state.
func causes(p *Process, d *Diagnosis, pk, steady []StepPeak) Causes {
	c := Causes{Step: -1, OptimizerCreated: Unknown, OptimizerAnatomy: Unknown, CacheGrowth: Unknown, NonPyTorchGrowth: Unknown}
	if len(p.steps) > 0 {
		st := p.steps[0]
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
func stepPhase(st *Step) (start Bytes, cell *Cell) {
	start = Unknown
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
	return Unknown, nil
}

// spike measures the optimizer step of the newest finished step in the
// table.
func spike(p *Process, last int) OptimizerSpike {
	o := OptimizerSpike{Step: -1, Start: Unknown, Peak: Unknown, Bytes: Unknown}
	for k := len(p.steps) - 1; k >= 0; k-- {
		st := p.steps[k]
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
func need(s *Store, p *Process, d *Diagnosis, tail []StepPeak) Need {
	n := Need{Allocated: Unknown, Reserved: Unknown, DeviceTotal: Unknown, Used: Unknown, Headroom: Unknown}
	if len(tail) == 0 {
		return n
	}
	n.Steady = d.Pattern == PatternSteady || d.Pattern == PatternWarmup
	n.Allocated, n.Reserved, _ = maxOf(tail)
	if c := p.Hello.CUDA; c != nil && c.Total > 0 {
		n.DeviceTotal = Bytes(c.Total)
	} else if g := s.GPUFor(p); g != nil {
		n.DeviceTotal = g.Total
	}
	// The steps' NVML peaks are per phase and cost nothing to read; the
	// device series would be a scan of every sample of the tail.
	_, _, gpu := maxOf(tail)
	switch p.GPUSource {
	case "process":
		if others := d.Layers.Now.OtherProcesses; gpu.Known() && others.Known() {
			n.Used, n.UsedBasis = gpu+others, "NVML process peak plus other processes now"
		}
	case "device":
		n.Used, n.UsedBasis = gpu, "NVML device used, all processes"
	}
	if !n.Used.Known() && n.Reserved.Known() {
		n.Used, n.UsedBasis = n.Reserved, "peak reserved; without NVML the CUDA context and other processes are not counted"
	}
	n.Headroom = gap(n.DeviceTotal, n.Used)
	if n.Steady { // a growing run has no batch that fits for good
		n.Batch = batch(p, n.Headroom, n.UsedBasis)
	}
	return n
}

// batch estimates the largest batch that fits in the headroom, assuming
// activations scale linearly with the batch size.
func batch(p *Process, headroom Bytes, basis string) *BatchEstimate {
	a := p.Anatomy
	if a == nil || !headroom.Known() || a.Activations <= 0 || a.BatchSize <= 0 {
		return nil
	}
	per := a.Activations / a.BatchSize
	if per <= 0 {
		return nil
	}
	return &BatchEstimate{
		Current: int64(a.BatchSize), Max: int64(a.BatchSize + headroom/per), PerSample: per,
		Assumes: []string{
			fmt.Sprintf("activations scale linearly with batch size (%s per sample, measured at batch %d)", per.Human(), a.BatchSize),
			"weights, gradients and optimizer state do not depend on the batch",
			"temporaries and the allocator cache stay as they are (they grow too: keep a margin)",
			"headroom from " + basis,
		},
	}
}

// advise lists the suggestions the measurements call for, each with the
// numbers behind it.
func advise(d *Diagnosis) []Advice {
	var out []Advice
	switch d.Pattern {
	case PatternGrowth:
		out = append(out, Advice{
			Text:    "look for tensors kept across steps (e.g. accumulating `loss` instead of `loss.item()`, lists of outputs, caches keyed by step)",
			Because: fmt.Sprintf("peak grows %s/step over steps %d–%d (least-squares fit)", d.GrowthPerStep.Human(), d.GrowthFrom, d.GrowthTo),
		})
	case PatternWarmup:
		out = append(out, Advice{
			Text:    "nothing to fix: the first steps' peak is not a requirement, the steady peak is what matters",
			Because: fmt.Sprintf("peak %s→%s MiB over steps %d–%d, steady since step %d", d.PeakBefore.MiBString(), d.PeakAfter.MiBString(), d.FirstStep, d.SteadyFrom-1, d.SteadyFrom),
		})
	}
	pk := &d.Layers.Peak
	if share, ok := shareOf(d.Peak.DominantBytes, pk.Allocated); ok && share >= DominantShare {
		because := fmt.Sprintf("%s %s MiB = %.0f%% of the %s MiB peak (%s)", d.Peak.Dominant, d.Peak.DominantBytes.MiBString(), 100*share, pk.Allocated.MiBString(), Where(d.Peak.Step, d.Peak.Phase))
		switch d.Peak.Dominant {
		case "activations", TransientName:
			out = append(out, Advice{Text: "activation checkpointing, or smaller micro-batches with gradient accumulation", Because: because})
		case "optimizer state":
			out = append(out, Advice{Text: "lighter optimizer state (8-bit Adam, Adafactor) or shard it (ZeRO, FSDP)", Because: because})
		}
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
func shareOf(part, whole Bytes) (float64, bool) {
	if !part.Known() || !whole.Known() || whole == 0 {
		return 0, false
	}
	return float64(part) / float64(whole), true
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
