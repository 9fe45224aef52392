package diagnose

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// freshen says how fresh the activations figure is at the layers' step and
// scales or withdraws it when it belongs to another input size: scaled by
// the input-size ratio when the hook reported both sizes (tokens when both
// are known, else the batch), withdrawn (stale) when it did not and the
// step's peak shows the input changed.
func freshen(p *session.Process, l *Layers, a *session.Anatomy) {
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
	// A figure the hook scaled by 1 (the same input size as measured) is
	// the measured one, said as such.
	scaled := false
	if a.ActivationsSource == "scaled" {
		if r, ok := ratio(a.Tokens, a.ActivationsTokens, a.BatchSize.Int64(), a.ActivationsBatch); !ok {
			note += "; scaled by the hook (estimate)"
			scaled = true
		} else if r != 1 {
			note += fmt.Sprintf("; scaled ×%s by the hook (estimate)", ratioString(r))
			scaled = true
		}
	}
	l.ActivationsNote = note
	l.ActivationsBrief = fmt.Sprintf("step %d", a.ActivationsStep)
	if a.ActivationsBatch > 0 {
		l.ActivationsBrief += fmt.Sprintf(", batch %d", a.ActivationsBatch)
	}
	if scaled {
		l.ActivationsBrief = "scaled from " + l.ActivationsBrief + " (est.)"
	}
	live := activationsLive(l.Phase)
	if l.Step < 0 || l.Step == a.ActivationsStep || !live {
		return
	}
	batch, tokens := inputOf(p, l.Step)
	if batch > 0 || tokens > 0 {
		mt, mb := a.ActivationsTokens, a.ActivationsBatch
		if a.ActivationsSource == "scaled" { // the figure is already at the anatomy's size
			mt, mb = a.Tokens, a.BatchSize.Int64()
		}
		if r, ok := ratio(tokens, mt, batch, mb); ok {
			if r != 1 {
				l.Activations = session.Bytes(math.Round(float64(a.Activations) * r))
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
	then, _ := peakOfStep(p, a.ActivationsStep)
	now, running := peakOfStep(p, l.Step)
	if !then.Known() || !now.Known() || absDiff(now, then) <= Tolerance(then) || running && now < then {
		return // (a step still running has not reached its peak yet)
	}
	l.ActivationsStale = true
	l.ActivationsBrief = fmt.Sprintf("stale (step %d)", a.ActivationsStep)
	l.ActivationsNote = "stale: " + note + fmt.Sprintf("; step %d peaks %s MiB above step %d", l.Step, now.Sub(then).MiBString(), a.ActivationsStep)
	if now < then {
		l.ActivationsNote = "stale: " + note + fmt.Sprintf("; step %d peaks %s MiB below step %d", l.Step, then.Sub(now).MiBString(), a.ActivationsStep)
	}
	l.Activations, l.Other = session.Unknown, session.Unknown
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
func inputOf(p *session.Process, step int) (batch, tokens int64) {
	batch, tokens = -1, -1
	if st := StepRow(p, step); st != nil {
		batch, tokens = st.Batch, st.Tokens
	}
	for k := len(p.Spans()) - 1; k >= 0 && k >= len(p.Spans())-8; k-- {
		if sp := &p.Spans()[k]; sp.Step == step && !sp.User {
			batch, tokens = max(batch, sp.Batch), max(tokens, sp.Tokens)
		}
	}
	return batch, tokens
}

// peakOfStep is a step's training peak from the per-step summaries and the
// open phases' peaks, Unknown when unknown; running is true while the step
// has an open phase (its peak so far is a lower bound).
func peakOfStep(p *session.Process, step int) (v session.Bytes, running bool) {
	v = session.Unknown
	for k := len(p.StepPeaks()) - 1; k >= 0; k-- {
		if p.StepPeaks()[k].Index == step {
			v = p.StepPeaks()[k].PeakAllocated
			break
		}
	}
	for _, i := range p.OpenSpans() {
		if sp := &p.Spans()[i]; sp.Step == step && !sp.User {
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
