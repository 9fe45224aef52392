package tui

import (
	"strconv"
	"strings"
	"time"

	"github.com/vramscope/vramscope/session"
)

// stripCell is what one cell of the phase strip shows: the phase with the
// highest allocated peak among those that overlap the cell, so a spike in
// the plot sits above the letter of the phase it happened in.
// The look is kept as its letter and escape codes (the looks differ by
// foreground only): a whole lipgloss.Style per cell made the row tens of
// kilobytes a frame.
type stripCell struct {
	letter rune
	wr     wrap
	peak   session.Bytes
	set    bool
}

// visibleSpans returns the spans that may overlap [from, to): spans are in
// start order, and a span rarely outlives the 64 that follow it.
func visibleSpans(spans []session.Span, from, to time.Time) []session.Span {
	lo := searchStart(spans, from)
	lo = max(lo-64, 0)
	hi := searchStart(spans, to)
	return spans[lo:hi]
}

func searchStart(spans []session.Span, t time.Time) int {
	lo, hi := 0, len(spans)
	for lo < hi {
		mid := (lo + hi) / 2
		if spans[mid].Start.Before(t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// cellRange maps [a, b) to the cells it covers, false when outside.
func cellRange(a, b, from, to time.Time, cells int) (int, int, bool) {
	lo, hi := from.UnixNano(), to.UnixNano()
	an, bn := a.UnixNano(), b.UnixNano()
	if bn <= lo || an >= hi || cells <= 0 {
		return 0, 0, false
	}
	w, n := hi-lo, int64(cells)
	i, j := int((an-lo)*n/w), int((bn-lo)*n/w)
	return max(i, 0), min(max(j, i), cells-1), true
}

// phaseStrip renders one line: left blank cells, then a letter per cell
// that a span covers. An open span runs up to now, the newest data: the
// cells after it stay blank.
func phaseStrip(spans []session.Span, from, to, now time.Time, left, cells, w int) string {
	row := make([]stripCell, max(cells, 0))
	// The window holds hundreds of spans of a handful of phases: look each
	// phase up once.
	type seen struct {
		name   string
		user   bool
		letter rune
		wr     wrap
	}
	var looks []seen
	lookup := func(name string, user bool) (rune, wrap) {
		for _, l := range looks {
			if l.name == name && l.user == user {
				return l.letter, l.wr
			}
		}
		l := lookOf(name, user)
		looks = append(looks, seen{name, user, l.letter, wrapOf(l.style)})
		return l.letter, looks[len(looks)-1].wr
	}
	vis := visibleSpans(spans, from, to)
	for n := range vis {
		sp := &vis[n] // a span is 300 bytes: read in place
		end := sp.End
		if sp.Open() {
			end = now
			if end.Before(sp.Start) {
				end = sp.Start
			}
		}
		i, j, ok := cellRange(sp.Start, end, from, to, cells)
		if !ok {
			continue
		}
		var letter rune
		var wr wrap
		for k := i; k <= j; k++ {
			if c := &row[k]; !c.set || sp.PeakAllocated > c.peak {
				if letter == 0 {
					letter, wr = lookup(sp.Name, sp.User)
				}
				*c = stripCell{letter, wr, sp.PeakAllocated, true}
			}
		}
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", left))
	for k := 0; k < len(row); {
		c := row[k]
		n := 1
		for k+n < len(row) && row[k+n].set == c.set && row[k+n].letter == c.letter {
			n++
		}
		if c.set {
			b.WriteString(c.wr.prefix)
			b.WriteString(strings.Repeat(string(c.letter), n))
			b.WriteString(c.wr.suffix)
		} else {
			b.WriteString(strings.Repeat(" ", n))
		}
		k += n
	}
	return fitKnown(b.String(), left+len(row), w) // one cell per letter
}

// stepLabels renders one line with each step's number at the cell where it
// begins, as many as fit without touching.
func stepLabels(spans []session.Span, from, to time.Time, left, cells, w int) string {
	line := []rune(strings.Repeat(" ", max(left+cells, 0)))
	if left >= 5 {
		copy(line, []rune("step"))
	}
	free, last := left, -1
	vis := visibleSpans(spans, from, to)
	for n := range vis {
		sp := &vis[n]
		if sp.User || sp.Step == last || sp.Start.Before(from) {
			continue
		}
		last = sp.Step
		i, _, ok := cellRange(sp.Start, sp.Start.Add(1), from, to, cells)
		if !ok || left+i < free {
			continue
		}
		label := []rune("┊" + strconv.Itoa(sp.Step))
		if left+i+len(label) > len(line) {
			break
		}
		copy(line[left+i:], label)
		free = left + i + len(label) + 1
	}
	wr := wrapOf(styleDim)
	return fitKnown(wr.prefix+string(line)+wr.suffix, len(line), w) // one cell per rune
}
