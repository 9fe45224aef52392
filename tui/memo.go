package tui

import (
	"strings"
	"sync"

	"github.com/charmbracelet/lipgloss"
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
