package tui

import (
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"

	"github.com/vramscope/vramscope/session"
)

// The chart is two layers: ntcharts' canvas holds the axes and their
// labels, the chart's own dots and owner arrays hold the plot area (the
// graph cells right of the Y axis and above the X axis). Only the axis
// cells of the canvas are cleared and read each frame.

// clearAxes empties the canvas cells the axes and labels are drawn on:
// the columns up to the Y axis, and the rows from the X axis down.
func (c *memChart) clearAxes() {
	cv := &c.lc.Canvas
	o := c.lc.Origin()
	for y := 0; y < cv.Height(); y++ {
		to := o.X
		if y >= o.Y {
			to = cv.Width() - 1
		}
		for x := 0; x <= to; x++ {
			cv.SetCell(canvas.Point{X: x, Y: y}, canvas.Cell{})
		}
	}
}

// clearPlot empties the plot area, sized to the graph.
func (c *memChart) clearPlot() {
	n := max(c.lc.GraphWidth(), 0) * max(c.lc.GraphHeight(), 0)
	if cap(c.dots) < n {
		c.dots, c.owner = make([]uint8, n), make([]int8, n)
	}
	c.dots, c.owner = c.dots[:n], c.owner[:n]
	clear(c.dots)
	for i := range c.owner {
		c.owner[i] = -1
	}
}

// plotSeries draws one series, one braille dot column per Column: a
// vertical stroke from its minimum to its maximum (Series.Columns keeps
// both, so no peak is lost however far out the view is zoomed), joined to
// the previous column's last value, which empty columns hold.
func (c *memChart) plotSeries(cols []session.Column, top float64, k int8) {
	gw, gh := c.lc.GraphWidth(), c.lc.GraphHeight()
	if gw <= 0 || gh <= 0 || top <= 0 {
		return
	}
	rows := 4 * gh
	set := func(cell int, bits uint8) {
		c.dots[cell] |= bits
		// Two flat counters in one cell (max allocated 4.2 and reserved
		// 4.4 GiB share a row at 80×24) take turns by column, so both
		// colours show along the line; allocated, drawn first, is
		// drawn over, except by max allocated: with exact peaks that is
		// the peak since the last read, equal to allocated wherever
		// allocated rises, so the two take turns as well.
		if o := c.owner[cell]; o >= 0 && (o != allocSeries || k == maxSeries) && o != k && (cell%gw)%2 == 1 {
			return
		}
		c.owner[cell] = k
	}
	dot := func(v int64) int {
		return min(max(int(float64(v)/top*float64(rows-1)+0.5), 0), rows-1)
	}
	last := len(cols) - 1
	for last >= 0 && !cols[last].Has {
		last--
	}
	prev := -1
	for i, col := range cols[:min(last+1, 2*gw)] {
		if !col.Has {
			// A gauge holds its value between samples (NVML comes at 5 Hz).
			if prev >= 0 {
				set((gh-1-prev/4)*gw+i/2, brailleBits[i%2][3-prev%4])
			}
			continue
		}
		lo, hi := dot(col.Min), dot(col.Max)
		if prev >= 0 {
			lo, hi = min(lo, prev), max(hi, prev)
		}
		for y := lo; y <= hi; y++ {
			set((gh-1-y/4)*gw+i/2, brailleBits[i%2][3-y%4]) // overlapping series share a cell's dots
		}
		prev = dot(col.Last)
	}
}

// view writes the plot block, canvas.Model.View without a lipgloss Render
// per cell: the cells differ only by foreground, so each colour is
// rendered once (around a marker) and runs of cells are wrapped in its
// escape codes.
func (c *memChart) view(b *strings.Builder) {
	cv := &c.lc.Canvas
	w, h := cv.Width(), cv.Height()
	gw, gh := c.lc.GraphWidth(), c.lc.GraphHeight()
	ox := c.lc.Origin().X + 1
	var cur wrap
	var curFG lipgloss.TerminalColor
	// curPlot is the plot colour open (owner+1, 0 for no dot), -1 when an
	// axis cell's is: runs of plot cells compare small ints, not
	// interfaces.
	curPlot := -1
	for y := 0; y < h; y++ {
		if y > 0 {
			b.WriteByte('\n')
		}
		open := false
		for x := 0; x < w; x++ {
			var r rune
			var fg lipgloss.TerminalColor
			var style lipgloss.Style // read only when the colour changes
			inPlot, id := false, -1
			if gx := x - ox; gx >= 0 && gx < gw && y < gh {
				k := y*gw + gx
				inPlot, fg, id = true, lipgloss.NoColor{}, 0
				if d := c.dots[k]; d != 0 {
					r, fg, id = 0x2800|rune(d), seriesFG[c.owner[k]], int(c.owner[k])+1
				}
				if open && id == curPlot {
					if r == 0 {
						r = ' '
					}
					b.WriteRune(r)
					continue
				}
			} else {
				cell := cv.Cell(canvas.Point{X: x, Y: y})
				r, fg, style = cell.Rune, cell.Style.GetForeground(), cell.Style
			}
			if r == 0 {
				r = ' '
			}
			if !open || fg != curFG {
				if open {
					b.WriteString(cur.suffix)
				}
				if inPlot {
					style = lipgloss.NewStyle().Foreground(fg)
				}
				cur, curFG, open = wrapOf(style), fg, true
				b.WriteString(cur.prefix)
			}
			curPlot = id
			b.WriteRune(r)
		}
		if open {
			b.WriteString(cur.suffix)
		}
	}
}

// seriesFG are the series' colours as interface values, made once (a
// conversion per cell would allocate).
var seriesFG = func() []lipgloss.TerminalColor {
	fg := make([]lipgloss.TerminalColor, len(chartSeries))
	for i, s := range chartSeries {
		fg[i] = s.color
	}
	return fg
}()
