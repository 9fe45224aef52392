package tui

import (
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// canvasView is canvas.Model.View without a lipgloss Render per cell: the
// chart's cells differ only by foreground, so each colour is rendered once
// (around a marker) and runs of cells are wrapped in its escape codes.
func canvasView(c *canvas.Model) string {
	var b strings.Builder
	w, h := c.Width(), c.Height()
	b.Grow(w * h * 4)
	var cur wrap
	var curFG lipgloss.TerminalColor
	for y := 0; y < h; y++ {
		if y > 0 {
			b.WriteByte('\n')
		}
		open := false
		for x := 0; x < w; x++ {
			cell := c.Cell(canvas.Point{X: x, Y: y})
			r := cell.Rune
			if r == 0 {
				r = ' '
			}
			if fg := cell.Style.GetForeground(); !open || fg != curFG {
				if open {
					b.WriteString(cur.suffix)
				}
				cur, curFG, open = wrapOf(cell.Style), fg, true
				b.WriteString(cur.prefix)
			}
			b.WriteRune(r)
		}
		if open {
			b.WriteString(cur.suffix)
		}
	}
	return b.String()
}

// wrap is a style's escape codes around its text.
type wrap struct{ prefix, suffix string }

var wraps = map[lipgloss.TerminalColor]wrap{}

// wrapOf renders a style once around a marker to learn its codes. Only
// the foreground counts (the chart's styles differ by nothing else).
func wrapOf(s lipgloss.Style) wrap {
	fg := s.GetForeground()
	if w, ok := wraps[fg]; ok {
		return w
	}
	out := s.Render("\x00")
	i := strings.IndexByte(out, 0)
	w := wrap{out[:i], out[i+1:]}
	wraps[fg] = w
	return w
}

// truncate cuts a styled string to w cells, with an ellipsis.
func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// padLines makes s exactly h lines of exactly w cells. A line already w
// cells wide is kept as it is.
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

// joinColumns puts blocks side by side, line by line; each block's lines
// must already be exactly as wide as the block.
func joinColumns(blocks ...string) string {
	cols := make([][]string, len(blocks))
	n := 0
	for i, b := range blocks {
		cols[i] = strings.Split(b, "\n")
		n = max(n, len(cols[i]))
	}
	var sb strings.Builder
	for y := 0; y < n; y++ {
		if y > 0 {
			sb.WriteByte('\n')
		}
		for _, c := range cols {
			if y < len(c) {
				sb.WriteString(c[y])
			}
		}
	}
	return sb.String()
}

// stackLines joins blocks whose lines are already w cells wide, cut or
// padded to h lines.
func stackLines(blocks []string, w, h int) string {
	s := strings.Join(blocks, "\n")
	if n := strings.Count(s, "\n") + 1; n < h {
		s += strings.Repeat("\n"+strings.Repeat(" ", w), h-n)
	} else if n > h {
		lines := strings.SplitN(s, "\n", h+1)
		s = strings.Join(lines[:h], "\n")
	}
	return s
}
