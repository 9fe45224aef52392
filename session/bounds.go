package session

// DefaultMaxProcesses bounds the processes a Store keeps (WithMaxProcesses).
// A process costs a few KB plus its hello (at most one 64 KiB line), so
// the bound holds the store's per-session memory under about 70 MB however
// many sessions come and go: 100,000 hellos cost 229 MB before it.
const DefaultMaxProcesses = 1024

// sessionTotals are figures over every step of a session, kept as steps
// arrive, so that bounding the per-step summaries (WithMaxStepPeaks) does
// not bound them: past 11,000 steps the report's totals were wrong. The
// newest step is kept apart, so a report can leave out a step the process
// ended in the middle of.
type sessionTotals struct {
	steps     int
	newest    StepPeak
	hasNewest bool
	prior     peakPair // over the steps before the newest
}

// peakPair holds the steps with the highest allocated and reserved peaks.
type peakPair struct {
	alloc, reserve StepPeak
	seen           bool
}

func (pp *peakPair) add(sp StepPeak) {
	if !pp.seen || sp.PeakAllocated > pp.alloc.PeakAllocated {
		pp.alloc = sp
	}
	if !pp.seen || sp.PeakReserved > pp.reserve.PeakReserved {
		pp.reserve = sp
	}
	pp.seen = true
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
	case t.hasNewest && sp.Index == t.newest.Index:
		t.newest = sp
	default: // a late update of an older step: summaries only grow
		t.prior.add(sp)
	}
}

// StepCount is the number of steps of the whole session, however many
// summaries StepPeaks still holds.
func (p *Process) StepCount() int { return p.totals.steps }

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

// makeRoom forgets one process when the store holds its limit, before a
// new one is added: the oldest that is no longer connected and has no
// steps (a hello and nothing else), else the oldest no longer connected.
// A process whose connection has since said hello for another session
// counts as no longer connected. With every process live nothing is
// forgotten (the socket server bounds live connections).
func (s *Store) makeRoom() {
	if len(s.procs) < s.limits.procs {
		return
	}
	victim := -1
	for i, p := range s.procs {
		if s.live(p) {
			continue
		}
		if p.StepCount() == 0 {
			victim = i
			break
		}
		if victim < 0 {
			victim = i
		}
	}
	if victim < 0 {
		return
	}
	p := s.procs[victim]
	s.procs = append(s.procs[:victim], s.procs[victim+1:]...)
	s.procs[len(s.procs):cap(s.procs)][0] = nil // drop the moved-out pointer
	delete(s.byKey, p.Key)
	if s.byConn[p.Conn] == p {
		delete(s.byConn, p.Conn)
	}
	s.Forgotten++
}

// live reports whether p still speaks on its connection.
func (s *Store) live(p *Process) bool { return p.Connected && s.byConn[p.Conn] == p }
