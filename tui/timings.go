package tui

import (
	"strconv"
	"strings"
	"time"

	"github.com/vramscope/vramscope/session"
)

// A CPU run has no allocator to read: every memory figure would be a
// dash. Its body is a compact view instead, timings only: how long each
// phase of each step took, with the table's scrolling keys.

// cpuView is the compact body of a CPU run, w × h cells.
func (m *Model) cpuView(p *session.Process, w, h int) string {
	title := rendered(&styleBold, "Timings") + rendered(&styleDim, " · CPU run: no CUDA allocator, so no memory figures")
	t := m.table
	t.w, t.h = w, h-1
	return stackLines([]string{fitKept(title, w), t.timingsView(m.visibleSteps(p))}, w, h)
}

// timingsView is the step × phase table of durations, exactly t.h lines.
func (t stepsTable) timingsView(steps []*session.Step) string {
	from := t.first(steps)
	shown := steps[from:min(from+t.rows(), len(steps))]
	cols := phaseColumns(shown)
	const cellW, fixed = 10, 7 + 9
	for len(cols) > 0 && fixed+len(cols)*cellW > t.w {
		cols = cols[:len(cols)-1]
	}
	var b strings.Builder
	h1 := padded("step", 7, false)
	h2 := padded("", 7, false)
	for _, c := range cols {
		h1 += padded(clip(c, cellW-1), cellW, true)
		h2 += padded("ms", cellW, true)
	}
	h1 += padded("time", 9, true)
	h2 += padded("", 9, true)
	b.WriteString(fitKept(rendered(&styleHeading, h1), t.w) + "\n" + fitKept(rendered(&styleDim, h2), t.w))
	for _, st := range shown {
		var r strings.Builder
		r.WriteString("  ")
		padRight(&r, strconv.Itoa(st.Index), 5)
		for _, name := range cols {
			c := st.Cell(name)
			if c == nil || c.End.IsZero() {
				padLeft(&r, "·", cellW)
				continue
			}
			ms := msText(c.Busy)
			if c.Count > 1 {
				ms = strconv.Itoa(c.Count) + "× " + ms // micro-steps, their times summed
			}
			padLeft(&r, ms, cellW)
		}
		padLeft(&r, durText(st), 9)
		b.WriteString("\n" + fitKept(r.String(), t.w))
	}
	for i := len(shown); i < t.rows(); i++ {
		b.WriteString("\n" + strings.Repeat(" ", max(t.w, 0)))
	}
	hint := rendered(&styleDim, "· phase not run in that step · d diagnosis")
	if !t.follow && len(steps) > t.rows() {
		hint = rendered(&styleWarn, "following paused") + rendered(&styleDim, " — end/G to follow the newest step")
	}
	b.WriteString("\n" + fitKept(hint, t.w))
	return b.String()
}

// msText is a duration in milliseconds: "0.42", "7.5", "120".
func msText(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
	return strconv.FormatFloat(ms, 'f', 0, 64)
}

// padded is s in w cells, right-aligned or left-aligned.
func padded(s string, w int, right bool) string {
	var b strings.Builder
	if right {
		padLeft(&b, s, w)
	} else {
		padRight(&b, s, w)
	}
	return b.String()
}
