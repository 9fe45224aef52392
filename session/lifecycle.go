package session

// This file holds how a process ends (goodbye, closed connection, the
// hook's oom report) and how an ended forward is told training from
// evaluation.

import (
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// End is how a process ended: its goodbye, or the connection closing
// without one.
type End struct {
	At time.Time
	// Goodbye is true when the hook said goodbye; Reason is its reason
	// ("exit", "removed", "error").
	Goodbye bool
	Reason  string
	// Abrupt is true when the process ended without a goodbye, with an
	// uncaught exception (reason "error"), or in the middle of a step.
	Abrupt bool
	// Step and Phase are the automatic phase that was open, -1 and "" when
	// it ended between phases.
	Step  int
	Phase string
}

// OOM is the allocator's out-of-memory report as the hook sent it.
type OOM struct {
	At    time.Time
	Step  int
	Phase string
	Mem   *ipc.Mem
	// Requested, DeviceFree and DeviceTotal are Unknown when not sent.
	Requested, DeviceFree, DeviceTotal Bytes
}

// open0 is the index of a span in p.spans.
func (p *Process) open0(sp *Span) int {
	for i := len(p.spans) - 1; i >= 0; i-- {
		if &p.spans[i] == sp {
			return i
		}
	}
	return -1
}

// settleForward puts the ended forward waiting for its successor into its
// step: as training when a loss or backward follows it, else as an
// evaluation forward (no gradient: under no_grad, or its output needs
// none), a phase of its own called EvalPhase that does not count towards
// the training step's peak.
func (p *Process) settleForward(trained bool) {
	i := p.pendingFwd
	if i < 0 {
		return
	}
	p.pendingFwd = -1
	sp := &p.spans[i]
	if !trained {
		sp.Name, sp.User = EvalPhase, true
	}
	p.step(sp.Step).add(sp)
	p.updatePeak(sp.Step)
}

// EvalPhase names a forward that no backward followed: evaluation under
// no_grad. It is shown as a phase of its own, outside the training peak.
const EvalPhase = "eval"

// BetweenPhase names what the hook read between two steps when memory rose
// there with none of its phases open: something that is no forward of the
// watched model (another model's evaluation, an EMA copy, a checkpoint).
// A user phase of the step before it, outside the training peak.
const BetweenPhase = "between_steps"

// finish records how the process ended: at its goodbye, or when its
// connection closed without one.
func (p *Process) finish(at time.Time, goodbye bool, reason string) {
	if p.End != nil {
		return
	}
	p.settleForward(false)
	e := &End{At: at, Goodbye: goodbye, Reason: reason, Step: -1}
	for k := len(p.open) - 1; k >= 0; k-- {
		if sp := &p.spans[p.open[k]]; !sp.User {
			e.Step, e.Phase = sp.Step, sp.Name
			break
		}
	}
	if e.Step < 0 && (!goodbye || reason == "error") {
		// Gone between phases, or an uncaught exception there (a phase
		// that raised is closed on the way out): unless the last phase
		// left its step finished, the step it belongs to did not finish.
		for k := len(p.spans) - 1; k >= 0; k-- {
			if sp := &p.spans[k]; !sp.User {
				if !p.leftFinished(sp) {
					e.Step = sp.Step
				}
				if sp.Failed != "" {
					e.Phase = sp.Name // the phase that raised, closed on the way out
				}
				break
			}
		}
	}
	if e.Step < 0 && reason == "error" && p.OOM != nil && p.OOM.Step >= 0 {
		// The error was the out-of-memory one: its step did not finish,
		// though a phase closed on the way out (remove() at exit ends the
		// optimizer step that raised).
		e.Step = p.OOM.Step
	}
	e.Abrupt = !goodbye || reason == "error" || e.Step >= 0
	p.End = e
}

// leftFinished reports whether sp, the last automatic phase of a process
// that ended, left its step finished: an optimizer step that did not
// raise, or a zero_grad after the step's own update (a loop that zeroes
// after it, which may then die loading the next batch).
func (p *Process) leftFinished(sp *Span) bool {
	switch {
	case sp.Failed != "":
		return false
	case sp.Name == "step":
		return true
	case sp.Name == "zero_grad":
		st := p.step(sp.Step)
		return st.Stepped && st.Failed == ""
	}
	return false
}

// oom records the hook's out-of-memory report.
func (p *Process) oom(at time.Time, m *ipc.Message) {
	o := &OOM{At: at, Step: m.Step, Phase: m.Phase, Mem: copyMem(m.Mem), Requested: Unknown, DeviceFree: Unknown, DeviceTotal: Unknown}
	for _, f := range []struct {
		dst *Bytes
		v   *int64
	}{{&o.Requested, m.Requested}, {&o.DeviceFree, m.DeviceFree}, {&o.DeviceTotal, m.DeviceTotal}} {
		if f.v != nil {
			*f.dst = Bytes(*f.v)
		}
	}
	p.OOM = o
}
