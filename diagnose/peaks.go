package diagnose

import (
	"math"
	"time"

	"github.com/vramscope/vramscope/session"
)

// peakAt is where a process's session peak happened.
type peakAt struct {
	ok                       bool
	step                     int
	phase                    string // "" when not known (see phaseAs)
	phaseAs                  int    // the step whose phase is taken (the step repeats it), -1 its own
	allocated, reserved, gpu session.Bytes
	exact                    bool
	known                    Known
	from, to                 time.Time // the phase (or the step) that holds it
}

// SessionPeak is where a process's session peaks are: the steps with the
// highest allocated and the highest reserved peak over the whole session
// (its running totals, which every step reaches however many summaries
// the store still keeps), and the automatic phase of each that holds it.
// The report's totals and the diagnosis's peak both read it.
type SessionPeak struct {
	// Allocated and Reserved are the summaries of the two steps; their
	// peaks are Unknown when no step had one.
	Allocated, Reserved session.StepPeak
	// AllocatedCell and ReservedCell are the phases of those steps with
	// the largest allocated and reserved peak (the first one on a tie);
	// nil when the step has left the bounded table or has no such phase.
	// AllocatedCell holds the step's peak: a step read once has none of
	// its own and takes the phase of the breakdown step it repeats, whose
	// index is AllocatedAs (-1: its own phase).
	AllocatedCell, ReservedCell *session.Cell
	AllocatedAs                 int
}

// SessionPeakOf finds a process's session peaks, leaving out step
// exclude when it is the newest (a step the process ended in the middle
// of); -1 leaves out nothing. The first of equal peaks wins, so a
// warmup's peak is placed where it was first reached.
func SessionPeakOf(p *session.Process, exclude int) SessionPeak {
	a, r, ok := p.SessionPeaks(exclude)
	if !ok {
		return SessionPeak{Allocated: session.StepPeak{Index: -1, PeakAllocated: session.Unknown, PeakReserved: session.Unknown},
			Reserved: session.StepPeak{Index: -1, PeakAllocated: session.Unknown, PeakReserved: session.Unknown}}
	}
	tie := PeakTie(p)
	if tie > 0 && a.PeakAllocated.Known() {
		// The first step that came within tie of the peak reached it; the
		// figure stays the peak itself.
		for _, s := range p.StepPeaks() {
			if s.Index != exclude && s.PeakAllocated.Known() && s.PeakAllocated+tie >= a.PeakAllocated {
				if s.Index != a.Index {
					s.PeakAllocated = a.PeakAllocated
					a = s
				}
				break
			}
		}
	}
	sp := SessionPeak{Allocated: a, Reserved: r, AllocatedAs: -1}
	if a.PeakAllocated.Known() {
		c := peakCell(StepRow(p, a.Index), allocatedPeak, tie)
		if c != nil && c.PeakAllocated+tie < a.PeakAllocated {
			c = nil // no phase read holds the step's peak: never guess one
		}
		if ref := StepRow(p, a.SameAs); c == nil && ref != nil && a.SameAs >= 0 {
			if rc := peakCell(ref, allocatedPeak, tie); rc != nil && rc.PeakAllocated == ref.PeakAllocated {
				c, sp.AllocatedAs = rc, ref.Index
			}
		}
		sp.AllocatedCell = c
	}
	if r.PeakReserved.Known() {
		sp.ReservedCell = peakCell(StepRow(p, r.Index), reservedPeak, tie)
	}
	return sp
}

// findPeak locates the largest allocated peak of the session, with the
// phase that holds it when the step is still in the table: the read phase
// that holds the step's peak. A step read once has none: it takes the
// phase of the breakdown step it repeats (the hook's same_as), said so;
// else the phase is not known (""), never guessed. A step the process died
// in is partial and left out; an evaluation or user phase that peaked
// higher is the session peak (userPeak).
func findPeak(p *session.Process) peakAt {
	dead := partialStep(p)
	sp := SessionPeakOf(p, dead)
	a := sp.Allocated
	if !a.PeakAllocated.Known() {
		return peakAt{}
	}
	pk := peakAt{
		ok: true, step: a.Index, phaseAs: -1, allocated: a.PeakAllocated, reserved: a.PeakReserved, gpu: a.PeakGPU,
		from: a.Start, to: a.Start.Add(a.Duration),
	}
	if c := sp.AllocatedCell; c != nil && sp.AllocatedAs >= 0 {
		pk.phase, pk.phaseAs = c.Name, sp.AllocatedAs
	} else if c != nil {
		pk.phase, pk.reserved, pk.gpu, pk.exact = c.Name, c.PeakReserved, c.PeakGPU, c.Exact
		pk.from, pk.to = c.Start, c.End
	}
	// The step's peak may be known exactly when no phase's is (a plain
	// step's one read, or the counter at the step's end).
	pk.known = knownOf([]session.StepPeak{a})
	pk.exact = pk.exact || pk.known.Is == session.Exact
	userPeak(p, &pk, dead)
	return pk
}

// userPeak moves the session peak to an evaluation or other user phase
// that peaked above every training step (its own reads: a user phase is
// read at both edges), first of equals; only a stated peak is compared.
func userPeak(p *session.Process, pk *peakAt, dead int) {
	for _, st := range p.Steps() {
		if st.Index == dead {
			continue
		}
		for i := range st.Phases {
			c := &st.Phases[i]
			if !c.User || !c.Read || !c.Exact || c.PeakAllocated <= pk.allocated {
				continue
			}
			*pk = peakAt{
				ok: true, step: st.Index, phase: c.Name, phaseAs: -1, allocated: c.PeakAllocated, reserved: c.PeakReserved,
				gpu: c.PeakGPU, exact: true, known: Known{Is: session.Exact, SameAs: -1}, from: c.Start, to: c.End,
			}
		}
	}
}

// partialStep is the step the process ended in the middle of (its end
// names it), -1 when none.
func partialStep(p *session.Process) int {
	if p.End != nil && p.End.Step >= 0 && !p.Connected {
		return p.End.Step
	}
	return -1
}

// StepRow returns the table row of a step, nil when it is not (or no
// longer) in the bounded table.
func StepRow(p *session.Process, index int) *session.Step {
	for k := len(p.Steps()) - 1; k >= 0; k-- {
		if p.Steps()[k].Index == index {
			return p.Steps()[k]
		}
	}
	return nil
}

// allocatedPeak and reservedPeak are the values peakCell ranks phases by.
func allocatedPeak(c *session.Cell) session.Bytes { return c.PeakAllocated }
func reservedPeak(c *session.Cell) session.Bytes  { return c.PeakReserved }

// HostPeakTie is how close a later phase's peak RSS must come to an
// earlier one's to count as the same high. The host keeps the pages a
// phase touched (the C allocator does not give them back), so the phases
// after the high start at it and add a few pages: their peak is a tie,
// reached first by the phase that made it (the backward, not the
// optimizer step after it).
const HostPeakTie = session.MiB

// PeakTie is the closeness within which two peaks tie (the first to come
// within it reached the peak): the allocator's figures are exact to the
// byte; host RSS ties within HostPeakTie.
func PeakTie(p *session.Process) session.Bytes {
	if p.HostRSS() {
		return HostPeakTie
	}
	return 0
}

// peakCell is the automatic phase of a step with the largest known v,
// the first to come within tie of it on a tie; nil when there is none.
func peakCell(st *session.Step, v func(*session.Cell) session.Bytes, tie session.Bytes) *session.Cell {
	if st == nil {
		return nil
	}
	top := session.Unknown
	for i := range st.Phases {
		if c := &st.Phases[i]; !c.User && v(c).Known() {
			top = top.Max(v(c))
		}
	}
	for i := range st.Phases {
		if c := &st.Phases[i]; !c.User && v(c).Known() && v(c)+tie >= top {
			return c
		}
	}
	return nil
}

// UnfinishedStep is the newest step of a process that ended when that
// step never reached its update: the process has an optimizer, and its
// last step had no optimizer step, did not fail, and is not the step it
// died in (a loop's last zero_grad, as one that frees the gradients before
// an evaluation; micro-batches left over that the loop never stepped; the
// half of a GAN's iteration that updates the other model). No step the
// process ran; -1 when none.
func UnfinishedStep(p *session.Process) int {
	if p.Connected || p.NoOptimizer() {
		return -1
	}
	pk := p.StepPeaks()
	if len(pk) == 0 {
		return -1
	}
	if last := pk[len(pk)-1]; !last.Stepped && last.Failed == "" && last.Index != partialStep(p) {
		return last.Index
	}
	return -1
}

// phaseOf names the phase of a step that holds its peak, "" when unknown.
func phaseOf(p *session.Process, step int) string {
	if c := peakCell(StepRow(p, step), allocatedPeak, PeakTie(p)); c != nil {
		return c.Name
	}
	return ""
}

// finishedPeaks returns the summaries of the steps that are over and have
// allocator data. While the process is connected its newest step is still
// running, so its peak is not final and it is left out, as is a newest
// step that never reached its update (UnfinishedStep); a step that failed (an
// error the loop caught unwound a phase of it) never finished, and its
// peak is the failed attempt's: it is left out too.
func finishedPeaks(p *session.Process) []session.StepPeak {
	pk := p.StepPeaks()
	if len(pk) > 0 && (p.Connected || UnfinishedStep(p) >= 0 ||
		p.End != nil && p.End.Step >= 0 && pk[len(pk)-1].Index >= p.End.Step) {
		// Still running, ended in the middle of it or before its update: not a whole step.
		pk = pk[:len(pk)-1]
	}
	k := 0
	for k < len(pk) && pk[k].PeakAllocated.Known() && pk[k].Failed == "" {
		k++
	}
	if k == len(pk) {
		return pk // the common case: nothing to leave out, nothing to copy
	}
	out := make([]session.StepPeak, 0, len(pk))
	for _, sp := range pk {
		if sp.PeakAllocated.Known() && sp.Failed == "" {
			out = append(out, sp)
		}
	}
	return out
}

// Tolerance is how far apart two peaks near level may be and still count
// as the same level: LevelTolerance of it, at least LevelToleranceMin.
func Tolerance(level session.Bytes) session.Bytes {
	return max(session.Bytes(math.Round(LevelTolerance*float64(level))), LevelToleranceMin)
}

// fit is the least-squares line through the steps' allocated peaks (or,
// with held, the memory held between steps) against the step index: its slope in bytes per step and the slope's t statistic
// (slope over its standard error; +Inf for an exact rising line, 0 for a
// flat one).
func fit(pk []session.StepPeak, held bool) (slope, t float64) {
	of := func(sp *session.StepPeak) session.Bytes {
		if held {
			return sp.Held
		}
		return sp.PeakAllocated
	}
	n := float64(len(pk))
	if len(pk) < 3 {
		return 0, 0
	}
	var mx, my float64
	for i := range pk {
		mx += float64(pk[i].Index)
		my += float64(of(&pk[i]))
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range pk {
		dx := float64(pk[i].Index) - mx
		sxx += dx * dx
		sxy += dx * (float64(of(&pk[i])) - my)
	}
	if sxx == 0 {
		return 0, 0
	}
	slope = sxy / sxx
	var sse float64
	for i := range pk {
		r := float64(of(&pk[i])) - my - slope*(float64(pk[i].Index)-mx)
		sse += r * r
	}
	se := math.Sqrt(sse / (n - 2) / sxx)
	switch {
	case se > 0:
		return slope, slope / se
	case slope > 0:
		return slope, math.Inf(1)
	}
	return slope, 0
}

// maxOf returns the largest allocated, reserved and NVML peaks of pk,
// Unknown where none is known. Plain max is enough: known values are ≥ 0
// and Unknown is -1.
func maxOf(pk []session.StepPeak) (alloc, reserved, gpu session.Bytes) {
	alloc, reserved, gpu = session.Unknown, session.Unknown, session.Unknown
	for i := range pk {
		sp := &pk[i]
		alloc, reserved, gpu = max(alloc, sp.PeakAllocated), max(reserved, sp.PeakReserved), max(gpu, sp.PeakGPU)
	}
	return alloc, reserved, gpu
}
