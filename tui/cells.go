package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// truncate cuts a styled string to w cells, with an ellipsis.
func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// fitKnown is fit for a string known to be n cells wide.
func fitKnown(s string, n, w int) string {
	switch {
	case n == w:
		return s
	case n < w:
		return s + strings.Repeat(" ", w-n)
	}
	return fit(s, w)
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
		lines[i] = fitKept(l, w)
	}
	return strings.Join(lines, "\n")
}

// joinColumns puts blocks side by side, line by line; each block's lines
// must already be exactly as wide as the block.
func joinColumns(blocks ...string) string {
	cols := make([][]string, len(blocks))
	n, size := 0, 0
	for i, b := range blocks {
		cols[i] = strings.Split(b, "\n")
		n = max(n, len(cols[i]))
		size += len(b)
	}
	var sb strings.Builder
	sb.Grow(size + n)
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

// width is ansi.StringWidth without its grapheme segmentation for what
// the view is made of: printable ASCII and the one-cell symbols of
// oneCell, with SGR escape sequences (the styles' colours) in between.
// Anything else goes to ansi.StringWidth.
func width(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c <= 0x7e:
			n++
			i++
		case c == 0x1b: // CSI: ESC [ parameters intermediates final
			j := i + 1
			if j >= len(s) || s[j] != '[' {
				return ansi.StringWidth(s)
			}
			for j++; j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f; j++ {
			}
			if j >= len(s) || s[j] != 'm' {
				return ansi.StringWidth(s)
			}
			i = j + 1
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !oneCell(r) {
				return ansi.StringWidth(s)
			}
			n++
			i += size
		}
	}
	return n
}

// oneCell says whether r is one cell wide and never joins a neighbour into
// a grapheme cluster: the Latin-1 symbols, punctuation (dashes, bullets,
// the ellipsis), ≤ ≥, box drawing, ▲ and braille, which the view uses
// (cells_test.go checks them against ansi.StringWidth).
func oneCell(r rune) bool {
	switch {
	case r >= 0xa1 && r <= 0xff && r != 0xad: // not the soft hyphen
		return true
	case r >= 0x2010 && r <= 0x2027, r == 0x2264, r == 0x2265, r == 0x25b2:
		return true
	case r >= 0x2500 && r <= 0x257f, r >= 0x2800 && r <= 0x28ff:
		return true
	}
	return false
}

// fit cuts s to w cells and pads it to exactly w.
func fit(s string, w int) string {
	n := width(s)
	if n > w {
		s = truncate(s, w)
		n = width(s)
	}
	if n == w {
		return s
	}
	return s + strings.Repeat(" ", max(w-n, 0))
}
