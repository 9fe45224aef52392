package report

import (
	"time"

	"github.com/vramscope/vramscope/session"
)

// Stream is Build for a report that is written and then dropped: each
// process is built from the store when WriteJSON, WriteText or RanksOf
// reaches it, and is garbage once written. The report then holds one
// process's copy of the step table at a time, not every process's (64
// busy ranks: 160 MB beside a 400 MB store). Processes stays empty; the
// store must not change until the report is written.
func Stream(s *session.Store) *Report {
	r, start := headOf(s)
	if procs := s.ByRank(); len(procs) > 0 {
		r.Processes = nil
		r.pending = &pending{store: s, procs: procs, start: start}
	}
	return r
}

// pending is what a streamed report builds its processes from.
type pending struct {
	store *session.Store
	procs []*session.Process // in report order (ByRank)
	start time.Time
}

// processCount is the number of processes the report holds or streams.
func (r *Report) processCount() int {
	if r.pending != nil {
		return len(r.pending.procs)
	}
	return len(r.Processes)
}

// eachProcess calls fn with each process in report order, building it
// first when the report streams; it stops at fn's first error.
func (r *Report) eachProcess(fn func(*Process) error) error {
	if q := r.pending; q != nil {
		for _, p := range q.procs {
			out := buildProcess(q.store, p, q.start)
			if err := fn(&out); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range r.Processes {
		if err := fn(&r.Processes[i]); err != nil {
			return err
		}
	}
	return nil
}
