package tui

import (
	"sort"

	"github.com/vramscope/vramscope/session"
)

// Which process is on screen. The view orders processes by rank (those
// without one after, in the order they appeared), and focus follows the
// run: while the user has not picked a process with tab, the first live
// one in that order is shown; when the process on screen exits and
// another is running, or a new one connects after it has gone, focus
// moves to the first live process (with none live at the first look, to
// the one heard from last). A process picked with tab stays on screen
// while it is alive, and until something new happens after it has gone,
// so an exited rank can still be read at leisure.

// ordered returns the store's processes in display order. The slice is
// fresh when it had to be sorted; do not keep it across Apply calls.
func ordered(s *session.Store) []*session.Process {
	ps := s.Processes()
	if sort.SliceIsSorted(ps, func(i, j int) bool { return rankLess(ps[i], ps[j]) }) {
		return ps
	}
	out := append([]*session.Process(nil), ps...)
	sort.SliceStable(out, func(i, j int) bool { return rankLess(out[i], out[j]) })
	return out
}

// rankLess is session.RankLess: by rank, then pid, the order of every
// output.
func rankLess(a, b *session.Process) bool { return session.RankLess(a, b) }

// focus is the root model's memory of the process on screen.
type focus struct {
	key    string // the process shown; "" before the first
	pinned bool   // picked with tab: keep it while it lives
	live   int    // live processes at the last check
	alive  bool   // whether the shown one was live at the last check
}

// follow picks the process to show after the store changed, and reports
// whether it changed.
func (f *focus) follow(s *session.Store) bool {
	ps := ordered(s)
	var cur, firstLive *session.Process
	live := 0
	for _, p := range ps {
		if p.Key == f.key {
			cur = p
		}
		if p.Connected {
			live++
			if firstLive == nil {
				firstLive = p
			}
		}
	}
	next := cur
	switch {
	case cur == nil && firstLive != nil:
		next = firstLive
	case cur == nil && len(ps) > 0:
		// All gone before the first frame (a replay at max speed): the
		// newest to be heard from, as if focus had followed along.
		next = ps[0]
		for _, p := range ps {
			if p.Last.After(next.Last) {
				next = p
			}
		}
	case cur == nil:
	case cur.Connected && !f.pinned && firstLive != nil:
		next = firstLive // a lower rank that connected later comes first
	case !cur.Connected && firstLive != nil && (f.alive || live > f.live):
		// The one on screen just went, or a new one came after it had.
		next, f.pinned = firstLive, false
	}
	f.live = live
	changed := next != cur
	if next != nil {
		f.key, f.alive = next.Key, next.Connected
	}
	return changed
}

// pick shows the process after the shown one in display order (tab).
func (f *focus) pick(s *session.Store) bool {
	ps := ordered(s)
	if len(ps) == 0 {
		return false
	}
	i := indexOf(ps, f.key)
	p := ps[(i+1)%len(ps)]
	f.key, f.pinned, f.alive = p.Key, true, p.Connected
	return len(ps) > 1
}

// indexOf is the position of the process with key in ps, -1 if absent.
func indexOf(ps []*session.Process, key string) int {
	for i, p := range ps {
		if p.Key == key {
			return i
		}
	}
	return -1
}

// exitLog remembers which processes of a store said goodbye, so the
// header can tell an exit from a dropped connection. It is fed every
// batch right after the store applied it.
type exitLog struct {
	store *session.Store
	keys  map[string]bool
}

func newExitLog() *exitLog { return &exitLog{keys: map[string]bool{}} }

// note records the goodbyes (and new hellos) among evs, just applied to s.
// A log fed by another store starts over.
func (x *exitLog) note(s *session.Store, evs []session.Event) {
	if x == nil {
		return
	}
	if x.store != s {
		x.store, x.keys = s, map[string]bool{}
	}
	for _, ev := range evs {
		if k := ev.HelloSession(); k != "" {
			delete(x.keys, k) // back again
		} else if ev.IsGoodbye() {
			if p := s.ByConn(ev.Conn); p != nil {
				x.keys[p.Key] = true
			}
		}
	}
}

// exited reports whether p said goodbye and has not come back.
func (x *exitLog) exited(s *session.Store, p *session.Process) bool {
	return x != nil && x.store == s && !p.Connected && x.keys[p.Key]
}
