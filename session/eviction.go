package session

import "unsafe"

// DefaultMaxProcesses bounds the processes a Store keeps (WithMaxProcesses).
// A process costs a few KB plus its hello (at most one 64 KiB line): 100,000
// hellos cost 229 MB before this bound.
const DefaultMaxProcesses = 1024

// DefaultMaxGoneBytes bounds, in bytes, what a Store keeps of processes that
// are gone (WithMaxGoneBytes), as footprint estimates it: a count alone let
// 1,024 gone hellos of 60 KB each hold 64 MB of the store, and the live
// monitor grow by 190-290 MB. Live processes never count against it.
const DefaultMaxGoneBytes = 24 << 20

// makeRoom forgets one process when the store holds its limit, before a
// new one is added (goneVictim). With every process live nothing is
// forgotten (the socket server bounds live connections).
func (s *Store) makeRoom() {
	if len(s.procs) < s.limits.procs {
		return
	}
	if i := s.goneVictim(); i >= 0 {
		s.forget(i)
	}
}

// forgetGone forgets gone processes (goneVictim) while what they hold, as
// footprint estimates it, exceeds the store's bytes for them.
func (s *Store) forgetGone() {
	total := 0
	for _, p := range s.procs {
		if !s.live(p) {
			total += p.footprint()
		}
	}
	for total > s.limits.goneBytes {
		i := s.goneVictim()
		if i < 0 {
			return
		}
		total -= s.procs[i].footprint()
		s.forget(i)
	}
}

// goneVictim is the index of the process to forget first: the oldest that
// is no longer connected and has no steps (a hello and nothing else), else
// the oldest no longer connected, else -1. A process whose connection has
// since said hello for another session counts as no longer connected.
func (s *Store) goneVictim() int {
	victim := -1
	for i, p := range s.procs {
		if s.live(p) {
			continue
		}
		if p.StepCount() == 0 {
			return i
		}
		if victim < 0 {
			victim = i
		}
	}
	return victim
}

// forget drops the process at index i of s.procs.
func (s *Store) forget(i int) {
	p := s.procs[i]
	s.procs = append(s.procs[:i], s.procs[i+1:]...)
	s.procs[len(s.procs):cap(s.procs)][0] = nil // drop the moved-out pointer
	delete(s.byKey, p.Key)
	if s.byConn[p.Conn] == p {
		delete(s.byConn, p.Conn)
	}
	s.Forgotten++
}

// footprint estimates the bytes p holds: a base for an empty process (its
// six series and maps), its hello's text, and what it keeps of its steps,
// spans, peaks, marks, anatomies, curves and censuses.
func (p *Process) footprint() int {
	h := &p.Hello
	n := processBase + len(h.Session) + len(h.Host) + len(h.Torch) + 16*len(h.NSpid)
	for _, a := range h.Argv {
		n += 16 + len(a)
	}
	if c := h.CUDA; c != nil {
		n += len(c.Name) + len(c.UUID)
	}
	if k := h.Hook; k != nil {
		n += len(k.Version)
	}
	n += len(p.spans)*int(unsafe.Sizeof(Span{})) + len(p.peaks)*int(unsafe.Sizeof(StepPeak{}))
	n += len(p.steps) * int(unsafe.Sizeof(Step{})+stepCells*unsafe.Sizeof(Cell{}))
	n += len(p.Marks) * int(unsafe.Sizeof(Mark{})+markName)
	n += len(p.Anatomies) * int(unsafe.Sizeof(Anatomy{}))
	for _, s := range []*Series{p.Allocated, p.MaxAllocated, p.Reserved, p.GPU, p.NonPyTorch, p.Others} {
		n += s.heldBytes()
	}
	for i := range p.Censuses {
		n += p.Censuses[i].footprint()
	}
	return n
}

// processBase is an empty process's own memory.
// stepCells and markName are a step's usual phases (five, and a user's
// own) and a mark's usual name length: footprint stays O(1), as the store
// asks it of every gone process at each hello and each end.
const (
	processBase = 4 << 10
	stepCells   = 6
	markName    = 16
)

// live reports whether p still speaks on its connection.
func (s *Store) live(p *Process) bool { return p.Connected && s.byConn[p.Conn] == p }
