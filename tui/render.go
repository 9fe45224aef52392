package tui

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// wrap is a style's escape codes around its text.
type wrap struct{ prefix, suffix string }

var (
	wraps        = map[lipgloss.TerminalColor]wrap{}
	wrapsProfile = lipgloss.ColorProfile()
)

// checkWraps forgets the learnt codes when the colour profile changed
// (tests switch it); render calls it once a frame.
func checkWraps() {
	if p := lipgloss.ColorProfile(); p != wrapsProfile {
		wraps, wrapsProfile = map[lipgloss.TerminalColor]wrap{}, p
	}
}

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

// Most of a frame is the same text as the last one: the table's rows, the
// anatomy panel, the header, the legends and the key help change when a
// step ends or a value moves, not at every frame. Measuring a styled
// line's width (grapheme by grapheme) and rendering a lipgloss style cost
// far more than hashing the text, so both are kept in memos keyed by
// everything that determines their output: the text, the width or the
// style, and the colour profile. Both functions are pure, so the memos are
// shared by every model. Each is two maps: a lookup moves a hit into the
// newer one, and the older one is dropped when the newer fills up, so what
// a frame still uses stays and the rest ages out.
type memo[K comparable] struct {
	mu       sync.Mutex
	profile  termenv.Profile
	cur, old map[K]string
}

// memoSize bounds each generation: a frame uses a few hundred lines.
const memoSize = 2048

func (c *memo[K]) get(k K, make func() string) string {
	p := lipgloss.ColorProfile()
	c.mu.Lock()
	if c.cur == nil || c.profile != p {
		c.cur, c.old, c.profile = map[K]string{}, nil, p
	}
	s, ok := c.cur[k]
	if !ok {
		if s, ok = c.old[k]; ok {
			c.cur[k] = s
		}
	}
	c.mu.Unlock()
	if ok {
		return s
	}
	s = make()
	c.mu.Lock()
	if len(c.cur) >= memoSize {
		c.old, c.cur = c.cur, map[K]string{}
	}
	c.cur[k] = s
	c.mu.Unlock()
	return s
}

type fitKey struct {
	s string
	w int
}

var fits memo[fitKey]

// fitKept is fit for lines that recur from frame to frame.
func fitKept(s string, w int) string {
	return fits.get(fitKey{s, w}, func() string { return fit(s, w) })
}

type renderKey struct {
	st *lipgloss.Style
	s  string
}

var renders memo[renderKey]

// rendered is st.Render(s) for text that recurs from frame to frame; st is
// one of the package's style variables (its address is the key).
func rendered(st *lipgloss.Style, s string) string {
	return renders.get(renderKey{st, s}, func() string { return st.Render(s) })
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
// (render_test.go checks them against ansi.StringWidth).
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
