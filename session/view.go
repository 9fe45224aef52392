package session

import (
	"sort"

	"github.com/vramscope/vramscope/ipc"
)

// Read-only helpers for views: what an event says about a process's
// life, without reaching into the protocol's message types.

// IsGoodbye reports whether ev is a hook's goodbye: its process ended
// cleanly (exit or remove), as opposed to a connection that just dropped.
func (ev Event) IsGoodbye() bool { return ev.Msg != nil && ev.Msg.Type == ipc.TypeGoodbye }

// HelloSession is the hook session key a hello announces, "" for any other
// event.
func (ev Event) HelloSession() string {
	if ev.Msg != nil && ev.Msg.Type == ipc.TypeHello {
		return ev.Msg.Session
	}
	return ""
}

// ByConn returns the process that speaks (or last spoke) on connection
// conn, nil when none did. Unlike the store's live map it still answers
// after the connection ended.
func (s *Store) ByConn(conn uint64) *Process {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if s.procs[i].Conn == conn {
			return s.procs[i]
		}
	}
	return nil
}

// Rank is the process's distributed rank, -1 when the hello named none.
func (p *Process) Rank() int {
	if p.Hello.Rank == nil {
		return -1
	}
	return *p.Hello.Rank
}

// OnCPU reports whether the process has no CUDA allocator to read: no
// CUDA device in its hello and no allocator snapshot so far. Such a run
// has timings only.
func (p *Process) OnCPU() bool { return p.Hello.CUDA == nil && p.Mem == nil }

// HostRSS reports whether the process's figures are its host memory (a
// CPU run's mem_source): allocated = reserved = the RSS, max_* its peak.
func (p *Process) HostRSS() bool { return ipc.SourceKind(&p.Hello) == ipc.SourceCPU }

// OpenSpans returns the indices into Spans of the phases still open.
func (p *Process) OpenSpans() []int { return p.open }

// RankLess orders processes by rank, then pid; those without a rank come
// after the ranked ones, by pid. Every view and output lists processes in
// this order (a report of a two-rank run listed rank 1 first).
func RankLess(a, b *Process) bool {
	ra, rb := a.Rank(), b.Rank()
	switch {
	case ra >= 0 && rb < 0:
		return true
	case ra < 0 && rb >= 0:
		return false
	case ra != rb:
		return ra < rb
	}
	return a.Hello.PID < b.Hello.PID
}

// ByRank is the store's processes in RankLess order (a new slice).
func (s *Store) ByRank() []*Process {
	ps := append([]*Process(nil), s.procs...)
	sort.SliceStable(ps, func(i, j int) bool { return RankLess(ps[i], ps[j]) })
	return ps
}
