package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/session"
)

// The all-ranks line: with several processes (ranks of one job, or
// trainings side by side) the main view gives each one's peak, in rank
// order, and how far apart they are.

// peakOf is a process's session peak of allocated memory over its steps,
// Unknown before the first step (and on CPU). The store keeps it as steps
// arrive (Process.SessionPeaks): a frame of 256 ranks read 560,000 step
// summaries for it, twice.
func peakOf(p *session.Process) session.Bytes {
	if alloc, _, ok := p.SessionPeaks(-1); ok {
		return alloc.PeakAllocated
	}
	return session.Unknown
}

// spreadOf is the largest minus the smallest known peak, and the largest;
// ok is false with fewer than two known peaks.
func spreadOf(ps []*session.Process) (spread, top session.Bytes, ok bool) {
	lo, hi, n := session.Unknown, session.Unknown, 0
	for _, p := range ps {
		v := peakOf(p)
		if !v.Known() {
			continue
		}
		n++
		hi = hi.Max(v)
		if !lo.Known() || v < lo {
			lo = v
		}
	}
	if n < 2 {
		return session.Unknown, hi, false
	}
	return hi - lo, hi, true
}

// shortName is a process in the all-ranks line: its rank, else its pid.
func shortName(p *session.Process) string {
	if r := p.Rank(); r >= 0 {
		return strconv.Itoa(r)
	}
	return "pid " + strconv.Itoa(p.Hello.PID)
}

// ranksLine is the one-line summary, "" with a single process. The
// process on screen is in brackets; one that is gone is marked ■ (exited)
// or ○ (disconnected).
func (m *Model) ranksLine(shown *session.Process) string {
	ps := ordered(m.store)
	if len(ps) < 2 {
		return ""
	}
	label := "ranks"
	if ps[0].Rank() < 0 {
		label = "processes"
	}
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		s := shortName(p) + " " + peakOf(p).MiBString()
		if !p.Connected {
			s += m.goneMark(p)
		}
		if p == shown {
			s = "[" + s + "]"
		}
		parts = append(parts, s)
	}
	line := label + " peak MiB: " + strings.Join(parts, " · ")
	if sp, top, ok := spreadOf(ps); ok {
		line += fmt.Sprintf(" · spread %s MiB (%.1f%%)", sp.MiBString(), pct(sp, top))
	}
	return line
}

// ranksLines are the detail page's rows: one per process, then the spread.
func (m *Model) ranksLines() []string {
	ps := ordered(m.store)
	if len(ps) < 2 {
		return nil
	}
	out := make([]string, 0, len(ps)+1)
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%-22s peak %8s MiB allocated · %s", p.Label(), peakOf(p).MiBString(), m.stateWord(p)))
	}
	if sp, top, ok := spreadOf(ps); ok {
		out = append(out, fmt.Sprintf("spread: %s MiB between the highest and the lowest peak (%.1f%% of %s MiB)", sp.MiBString(), pct(sp, top), top.MiBString()))
	}
	return out
}

func pct(part, whole session.Bytes) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// goneMark tells an exit from a dropped connection without colour.
func (m *Model) goneMark(p *session.Process) string {
	if m.exits.exited(m.store, p) {
		return " ■"
	}
	return " ○"
}

// stateWord is a process's state in words: connected, exited (it said
// goodbye) or disconnected (gone without one).
func (m *Model) stateWord(p *session.Process) string {
	switch {
	case p.Connected:
		return rendered(&styleOK, "● connected")
	case m.exits.exited(m.store, p):
		return rendered(&styleInfo, "■ exited")
	}
	return rendered(&styleBad, "○ disconnected")
}
