package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// A CPU run's figures are the process's resident memory (RSS: docs/hook.md,
// "Devices"): the interpreter, torch's libraries, tensors and every Python
// object together. The step peaks, their pattern and their growth mean the
// same as on a GPU, in host memory; what is measured against the allocator
// (the anatomy's parts, the allocator cache, the optimizer's first step,
// the batch estimate, device headroom) has no meaning there and is left out.

// Host growth kinds: on a CPU run the resident memory does not fall back
// when torch's CPU allocator (or malloc) keeps what was freed, so held RSS
// rises with a growing input as it does with a leak. The word leak needs
// host memory's own evidence: input sizes that stay the same while held
// RSS rises.
const (
	// GrowthHostInput: host memory grows while the input grows.
	GrowthHostInput = "host-input"
	// GrowthHostUnknown: host memory grows and the hook reported no input
	// size to tell a growing input from a leak.
	GrowthHostUnknown = "host-unknown"
)

// hostGrowth re-reads a leak of host memory against the input sizes of
// its growing segment seg: a leak only when they are known and the same.
func hostGrowth(d *Diagnosis, seg []session.StepPeak) {
	if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || len(seg) == 0 {
		return
	}
	for _, tokens := range []bool{true, false} {
		from, to := medianInput(seg[:max(1, len(seg)/4)], tokens), medianInput(seg[len(seg)-max(1, len(seg)/4):], tokens)
		if from <= 0 || to <= 0 {
			continue
		}
		if float64(to) > 1.1*float64(from) {
			d.GrowthKind, d.InputFrom, d.InputTo = GrowthHostInput, from, to
			d.InputUnit = "samples"
			if tokens {
				d.InputUnit = "tokens"
			}
		}
		return // sizes known: flat means a leak
	}
	d.GrowthKind = GrowthHostUnknown
}

// hostOnly keeps what holds for host memory (the pattern, the growth and
// its rate, the peak's site, the ending, user phases) and drops the rest.
func hostOnly(d *Diagnosis, seg []session.StepPeak) {
	hostGrowth(d, seg)
	hostLayers(&d.Layers.Now)
	hostLayers(&d.Layers.Peak)
	d.Peak.Dominant, d.Peak.DominantBytes = "", session.Unknown
	d.Causes = Causes{Step: -1, OptimizerCreated: session.Unknown, OptimizerAnatomy: session.Unknown, CacheGrowth: session.Unknown, NonPyTorchGrowth: session.Unknown}
	d.Spike = OptimizerSpike{Step: -1, Start: session.Unknown, Peak: session.Unknown, Bytes: session.Unknown}
	d.Need.Batch = nil
	d.Need.Headroom, d.Need.DeviceTotal, d.Need.Used, d.Need.UsedBasis = session.Unknown, session.Unknown, session.Unknown, ""
	var keep []Advice
	for _, a := range d.Advice {
		if d.Pattern == PatternGrowth && d.GrowthKind == GrowthLeak && strings.HasPrefix(a.Text, "look for") {
			a.Text = fmt.Sprintf("look for objects kept across steps since step %d (e.g. accumulating `loss` instead of `loss.item()`, lists of outputs or batches, caches keyed by step, a DataLoader's growing state)", d.GrowthFrom)
			keep = append(keep, a)
		}
		if a.Text == noGradAdvice {
			keep = append(keep, a)
		}
	}
	d.Advice = keep
}

// hostLines are Lines for a CPU run, in host-memory terms.
func (d *Diagnosis) hostLines() []string {
	lines := []string{"host memory (RSS): " + d.pattern()}
	if cs := d.Culprits; cs != nil {
		lines = append(lines, cs.Lines()...)
	}
	if e := d.End; e != nil {
		lines = append(lines, e.Lines()...)
	}
	if a := d.AtOOM; a != nil {
		lines = append(lines, a.Lines()...)
	}
	lines = append(lines, d.unupdatedLines()...)
	for i := range d.Phases {
		lines = append(lines, d.Phases[i].Line())
	}
	if pk := d.Peak; pk.Step >= 0 {
		bound := ""
		if !pk.Exact {
			bound = " (at least)"
		}
		lines = append(lines, fmt.Sprintf("session peak RSS %s MiB%s, in %s (the whole process: interpreter, libraries, tensors)", pk.Allocated.MiBString(), bound, pk.Where()))
	}
	if n := d.Need; n.Allocated.Known() {
		kind := "highest"
		if n.Steady {
			kind = "steady"
		}
		lines = append(lines, fmt.Sprintf("needed (%s peak): %s MiB of host memory", kind, n.Allocated.MiBString()))
	}
	for _, a := range d.Advice {
		lines = append(lines, "→ "+a.Text+" — because "+a.Because)
	}
	return lines
}

// hostLayers leaves unknown what a host run cannot split: no allocator
// cache (allocated = reserved = RSS), no driver view. The tensor layers stay
// as measured; Other is the rest of the process (RSS − tensors).
func hostLayers(l *Layers) {
	l.Host = true
	l.Cache, l.NonPyTorch, l.OtherProcesses = session.Unknown, session.Unknown, session.Unknown
	l.ProcessUsed, l.DeviceUsed = session.Unknown, session.Unknown
}
