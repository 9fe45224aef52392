package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

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
