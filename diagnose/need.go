package diagnose

import (
	"fmt"
	"time"

	"github.com/vramscope/vramscope/session"
)

// need works out the memory the run needs (the steady peak when there is
// one), the headroom on its device and the largest batch that may fit.
func need(s *session.Store, p *session.Process, d *Diagnosis, tail []session.StepPeak) Need {
	n := Need{Allocated: session.Unknown, Reserved: session.Unknown, DeviceTotal: session.Unknown, Allowed: session.Unknown,
		Used: session.Unknown, Headroom: session.Unknown, AllocatedKnown: unknownKnown}
	if len(tail) == 0 {
		return n
	}
	n.AllocatedKnown = knownOf(tail) // PeakAfterKnown, but for a growth's earlier high
	n.Steady = d.Pattern == PatternSteady || d.Pattern == PatternWarmup
	n.Allocated, n.Reserved, _ = maxOf(tail)
	n.DeviceTotal = deviceTotal(s, p)
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
	if n.Allowed = allowedMaximum(p, n.DeviceTotal); n.Allowed.Known() && n.Reserved.Known() {
		// The allocator may reserve no more than the allowed maximum,
		// whatever the device has free.
		n.Headroom, n.Used, n.UsedBasis = gap(n.Allowed, n.Reserved), n.Reserved,
			"peak reserved against what this process may reserve ("+FractionWords+")"
	}
	// A growing run has no batch that fits for good; a need that is only a
	// lower bound gives no estimate.
	if n.Steady && n.AllocatedKnown.Is.Stated() {
		n.Batch = batch(p, n.Headroom, n.UsedBasis)
	}
	return n
}

// needSteps is the steps the need is read from: the steady (or newest)
// level's, tail; for a growth, every step where one before the growth (a
// long warmup's autotuning) peaked above its newest high: the highest peak
// so far is what the run has needed.
func needSteps(d *Diagnosis, pk, tail []session.StepPeak) []session.StepPeak {
	if d.Pattern != PatternGrowth || len(tail) == 0 {
		return tail
	}
	if all, _, _ := maxOf(pk); all > d.PeakAfter {
		return pk
	}
	return tail
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
