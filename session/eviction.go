package session

// DefaultMaxProcesses bounds the processes a Store keeps (WithMaxProcesses).
// A process costs a few KB plus its hello (at most one 64 KiB line), so
// the bound holds the store's per-session memory under about 70 MB however
// many sessions come and go: 100,000 hellos cost 229 MB before it.
const DefaultMaxProcesses = 1024

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
