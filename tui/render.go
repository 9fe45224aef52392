package tui

import (
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// canvasView is canvas.Model.View with one Render per run of same-coloured
// cells instead of one per cell: the chart's cells differ only by
// foreground, and this keeps a 200-column frame well under a millisecond.
func canvasView(c *canvas.Model) string {
	var b strings.Builder
	w, h := c.Width(), c.Height()
	b.Grow(w * h * 2)
	run := make([]rune, 0, w)
	for y := 0; y < h; y++ {
		if y > 0 {
			b.WriteByte('\n')
		}
		var style lipgloss.Style
		var fg lipgloss.TerminalColor
		flush := func() {
			if len(run) > 0 {
				b.WriteString(style.Render(string(run)))
				run = run[:0]
			}
		}
		for x := 0; x < w; x++ {
			cell := c.Cell(canvas.Point{X: x, Y: y})
			r := cell.Rune
			if r == 0 {
				r = ' '
			}
			if f := cell.Style.GetForeground(); x == 0 || f != fg {
				flush()
				style, fg = cell.Style, f
			}
			run = append(run, r)
		}
		flush()
	}
	return b.String()
}

// truncate cuts a styled string to w cells, with an ellipsis.
func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// padLines makes s exactly h lines of exactly w cells.
func padLines(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	for i, l := range lines {
		lines[i] = fit(l, w)
	}
	return strings.Join(lines, "\n")
}
