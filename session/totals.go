package session

// sessionTotals are figures over every step of a session, kept as steps
// arrive, so that bounding the per-step summaries (WithMaxStepPeaks) does
// not bound them: past 11,000 steps the report's totals were wrong. The
// newest step is kept apart, so a report can leave out a step the process
// ended in the middle of.
type sessionTotals struct {
	steps     int
	failed    int // steps whose phase failed (StepPeak.Failed)
	newest    StepPeak
	hasNewest bool
	prior     peakPair // over the steps before the newest
}

// peakPair holds the steps with the highest allocated and reserved peaks.
type peakPair struct {
	alloc, reserve StepPeak
	seen           bool
}

// add takes a step's summary. Of equal peaks the earliest step wins, as
// in a scan of the steps in order, and a step's newer summary replaces
// its older one (a late update may tell more of how its peak is known).
func (pp *peakPair) add(sp StepPeak) {
	if !pp.seen || wins(sp.PeakAllocated, sp.Index, pp.alloc.PeakAllocated, pp.alloc.Index) {
		pp.alloc = sp
	}
	if !pp.seen || wins(sp.PeakReserved, sp.Index, pp.reserve.PeakReserved, pp.reserve.Index) {
		pp.reserve = sp
	}
	pp.seen = true
}

// wins says whether peak v of step i takes the place of peak best of step
// at.
func wins(v Bytes, i int, best Bytes, at int) bool {
	return v > best || v == best && i <= at
}

// observe takes a step summary, new (a step not seen before) or updated.
func (t *sessionTotals) observe(sp StepPeak, isNew bool) {
	switch {
	case isNew:
		if t.hasNewest {
			t.prior.add(t.newest)
		}
		t.newest, t.hasNewest = sp, true
		t.steps++
		if sp.Failed != "" {
			t.failed++
		}
	case t.hasNewest && sp.Index == t.newest.Index:
		if sp.Failed != "" && t.newest.Failed == "" {
			t.failed++ // a step fails at its last edge, while it is the newest
		}
		t.newest = sp
	default: // a late update of an older step: summaries only grow
		t.prior.add(sp)
	}
}

// StepCount is the number of steps of the whole session, however many
// summaries StepPeaks still holds.
func (p *Process) StepCount() int { return p.totals.steps }

// FailedCount is how many of those steps failed: a phase of theirs raised
// and the loop went on (Step.Failed).
func (p *Process) FailedCount() int { return p.totals.failed }

// SessionPeaks returns the summaries of the steps with the highest
// allocated and reserved peaks over the whole session, leaving out step
// exclude when it is the newest (a step the process ended in the middle
// of); -1 leaves out nothing. ok is false when no step counts.
func (p *Process) SessionPeaks(exclude int) (alloc, reserved StepPeak, ok bool) {
	pp := p.totals.prior
	if t := &p.totals; t.hasNewest && t.newest.Index != exclude {
		pp.add(t.newest)
	}
	return pp.alloc, pp.reserve, pp.seen
}
