package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// WarmupRise splits why a warmup step peaks above the step before it
// (docs/diagnosis.md, "A warmup that explains itself"). Bytes are Unknown
// where their source is missing.
type WarmupRise struct {
	// Step peaks Rise above From (the step before it).
	Step int `json:"step"`
	From int `json:"from"`
	// Rise is the difference of the two steps' allocated peaks, FromPeak
	// and StepPeak.
	Rise     session.Bytes `json:"rise"`
	FromPeak session.Bytes `json:"from_peak"`
	StepPeak session.Bytes `json:"step_peak"`
	// Optimizer is the state From's optimizer step created (allocated
	// across its step phase), alive during Step; OptimizerAnatomy the
	// optimizer state the hook counted.
	Optimizer        session.Bytes `json:"optimizer"`
	OptimizerAnatomy session.Bytes `json:"optimizer_anatomy"`
	// Gradients are gradients kept between steps (zero_grad of Step freed
	// none of them) that From began without; 0 when zero_grad freed them.
	Gradients session.Bytes `json:"gradients"`
	// Unexplained is Rise minus the two above.
	Unexplained session.Bytes `json:"unexplained"`
	// Cache is the growth of reserved − allocated at the peak, NonPyTorch
	// of NVML process − reserved (reserved and device memory, on top of
	// the allocated rise).
	Cache      session.Bytes `json:"cache"`
	NonPyTorch session.Bytes `json:"non_pytorch"`
}

// warmupRise explains the rise into the warmup's high: WarmupStep against
// the step before it.
func warmupRise(p *session.Process, d *Diagnosis, pk []session.StepPeak) *WarmupRise {
	if d.Pattern != PatternWarmup {
		return nil
	}
	var prev, cur *session.StepPeak
	for i := 1; i < len(pk); i++ {
		if pk[i].Index == d.WarmupStep {
			prev, cur = &pk[i-1], &pk[i]
		}
	}
	if cur == nil || cur.PeakAllocated <= prev.PeakAllocated || cur.Peak == session.Bound || prev.Peak == session.Bound {
		return nil // a rise measured from a lower bound is no figure to split
	}
	w := &WarmupRise{Step: cur.Index, From: prev.Index, Rise: cur.PeakAllocated - prev.PeakAllocated,
		FromPeak: prev.PeakAllocated, StepPeak: cur.PeakAllocated,
		Optimizer: 0, OptimizerAnatomy: session.Unknown, Gradients: 0,
		Cache: session.Unknown, NonPyTorch: session.Unknown}
	before, after := StepRow(p, prev.Index), StepRow(p, cur.Index)
	if before != nil {
		if _, cell := stepPhase(before); cell != nil && cell.Rise.Known() && cell.Rise > 0 {
			w.Optimizer = min(cell.Rise, w.Rise)
		}
	}
	if a := anatomyAt(p, cur.Index); a != nil {
		w.OptimizerAnatomy = a.Optimizer
		// Gradients kept: zero_grad of Step freed nothing, and From began
		// without them (it is the first step: they were made in its
		// backward, after its start).
		if after != nil && before != nil && a.Gradients > 0 && prev.Index == d.FirstStep {
			if zg := after.Cell("zero_grad"); zg != nil && zg.AllocatedEnd.Known() && before.Held.Known() &&
				zg.AllocatedEnd+Tolerance(a.Gradients) >= before.Held {
				w.Gradients = min(a.Gradients, w.Rise-w.Optimizer)
			}
		}
	}
	w.Unexplained = w.Rise - w.Optimizer - w.Gradients
	w.Cache = gap(cur.PeakReserved.Sub(cur.PeakAllocated), prev.PeakReserved.Sub(prev.PeakAllocated))
	if p.GPUSource == "process" {
		w.NonPyTorch = gap(peakInEffect(p.NonPyTorch, cur.Start, cur.Start.Add(cur.Duration)),
			peakInEffect(p.NonPyTorch, prev.Start, prev.Start.Add(prev.Duration)))
	}
	return w
}

// Line answers "why is step 1 higher than step 0" in one line, short
// enough for the banner (the allocated rise; Cache and NonPyTorch are in
// the "warmup also grew" line, the anatomy's optimizer figure in the
// optimizer line).
func (w *WarmupRise) Line() string { return w.line("") }

// line appends at (" (3717→4309 MiB, loss of step 1)") after the causes,
// so a cut banner keeps the causes.
func (w *WarmupRise) line(at string) string {
	var parts []string
	if w.Optimizer > 0 {
		parts = append(parts, "optimizer state "+signed(w.Optimizer))
	}
	if w.Gradients > 0 {
		parts = append(parts, "gradients kept "+signed(w.Gradients))
	}
	parts = append(parts, "unexplained "+signed(w.Unexplained)+" MiB")
	return fmt.Sprintf("step %d +%s MiB over step %d: %s%s", w.Step, w.Rise.MiBString(), w.From, strings.Join(parts, ", "), at)
}

func signed(b session.Bytes) string {
	if b < 0 {
		return "−" + (-b).MiBString()
	}
	return "+" + b.MiBString()
}

// FirstStepPhases is what each automatic phase of the first step did to
// allocated memory: its end against its start, and how far its peak rose
// above its start (seed 001's questions: the jump in loss, the extra
// allocation in backward, the first optimizer.step()).
type FirstStepPhase struct {
	Phase string        `json:"phase"`
	Start session.Bytes `json:"start_allocated"`
	End   session.Bytes `json:"end_allocated"`
	Peak  session.Bytes `json:"peak_allocated"`
	Exact bool          `json:"exact"`
}

// firstStepPhases reads the first step of the table.
func firstStepPhases(p *session.Process) []FirstStepPhase {
	if len(p.Steps()) == 0 {
		return nil
	}
	st := p.Steps()[0]
	var out []FirstStepPhase
	prev := (*session.Cell)(nil)
	for i := range st.Phases {
		c := &st.Phases[i]
		if c.User {
			continue
		}
		if start := startOf(prev, c.Name); start.Known() && c.AllocatedEnd.Known() {
			out = append(out, FirstStepPhase{Phase: c.Name, Start: start, End: c.AllocatedEnd, Peak: c.PeakAllocated, Exact: c.Exact})
		}
		prev = c
	}
	return out
}

// firstStepLine is "step 0 by phase (allocated at its end; peak above its
// start): forward +2060 (peak +2060), loss +458 (peak +1374), ...".
func firstStepLine(step int, ph []FirstStepPhase) string {
	if len(ph) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ph))
	for _, f := range ph {
		s := fmt.Sprintf("%s %s", phaseName(f.Phase), signed(f.End-f.Start))
		if f.Peak.Known() && f.Peak > f.End && f.Peak > f.Start {
			peak := signed(f.Peak - f.Start)
			if !f.Exact {
				peak = "≥ " + peak
			}
			s += " (peak " + peak + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("step %d by phase, MiB at its end against its start (peak against its start): %s", step, strings.Join(parts, ", "))
}

func phaseName(n string) string {
	if n == "step" {
		return "optimizer step"
	}
	return n
}
