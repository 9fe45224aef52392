package diagnose

import (
	"math"

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
		if _, cell := stepPhase(st); cell != nil {
			c.OptimizerCreated = cell.Rise
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

// stepPhase returns a step's "step" cell and allocated at its start
// (startOf: the backward's end right before it). start is Unknown when
// another automatic phase came last, or none.
func stepPhase(st *session.Step) (start session.Bytes, cell *session.Cell) {
	prev := (*session.Cell)(nil)
	for i := range st.Phases {
		c := &st.Phases[i]
		if c.User {
			continue
		}
		if c.Name == "step" {
			return startOf(prev, c.Name), c
		}
		prev = c
	}
	return session.Unknown, nil
}

// startOf is allocated at the start of a phase named name whose step row
// has prev as the automatic phase before it: prev's end, when the hook
// begins name where prev ends (session.Follows). Unknown otherwise: after
// another phase the hook saw none of the work between (a loop calling the
// watched model's submodules goes from zero_grad's end to the step with
// its forward and backward unseen, and the step's read covers them: their
// peak, the gradients held at its end).
func startOf(prev *session.Cell, name string) session.Bytes {
	if prev == nil || !session.Follows(prev.Name, name) {
		return session.Unknown
	}
	return prev.AllocatedEnd
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
