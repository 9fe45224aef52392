package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// layout is how the screen is split.
type layout struct {
	bodyH          int // between the banner and the footer
	leftW, panelW  int // the panel is 0 wide below panelMinWidth columns
	chartH, tableH int
	diagH          int // diagnosis lines under the chart
	ranksH         int // the all-ranks line above the table
}

// Fixed rows: two header lines, the banner and the footer.
const chromeRows = 4

func (m *Model) layout() layout {
	// The chart's height does not follow the banner's: a wrapped banner
	// takes its rows from the table.
	l := layout{bodyH: max(m.h-chromeRows-max(m.bannerH-1, 0), 6), leftW: m.w}
	whole := max(m.h-chromeRows, 6)
	if m.w >= panelMinWidth {
		l.panelW = min(max(m.w/4, 38), 48)
		l.leftW = m.w - l.panelW - 1
	}
	switch {
	case m.h >= 55:
		l.diagH = 6
	case m.h >= 40:
		l.diagH = 4
	}
	if len(m.store.Processes()) > 1 {
		l.ranksH = 1
	}
	l.chartH = max(whole/2, 8)
	l.tableH = max(l.bodyH-l.chartH-l.diagH-l.ranksH, 4)
	return l
}

func (m *Model) resize(w, h int) {
	m.w, m.h = w, h
	l := m.layout()
	m.chart.resize(l.leftW, l.chartH-1) // one line for the chart's title
	m.table.w, m.table.h = m.tableSize()
	m.help.Width = w
	m.dirty = true
}

// tableSize is the steps table's size: under the chart, or the whole
// body in a CPU run's compact view (less its title line).
func (m *Model) tableSize() (int, int) {
	l := m.layout()
	if p := m.process(); p != nil && p.OnCPU() {
		return m.w, l.bodyH - 1
	}
	return l.leftW, l.tableH
}

// View returns the last rendered frame: rendering happens in Update, at
// most once per frame tick (and at once after a key or a resize), so View
// costs nothing however often bubbletea asks.
func (m Model) View() string { return m.frame }

// render draws the whole screen into m.frame.
func (m *Model) render() {
	m.dirty = false
	checkWraps()
	if !m.paused {
		m.follow() // the store may have changed since the last frame
	}
	p := m.process()
	d := m.diagnosis(p)
	banner := m.bannerLines(d)
	m.bannerH = len(banner)
	l := m.layout()
	m.table.w, m.table.h = m.tableSize() // the ranks line or a CPU run may have changed it
	var body string
	switch {
	case m.page != pageMain:
		body = m.pg.view(m.pageLines(p, d), m.w, l.bodyH)
	case p == nil:
		body = m.emptyView(l.bodyH)
	case p.OnCPU():
		body = m.cpuView(p, m.w, l.bodyH)
	default:
		body = m.bodyView(p, d, l)
	}
	parts := []string{m.headerView(p), strings.Join(banner, "\n"), body, fitKept(m.footerView(), m.w)}
	m.frame = strings.Join(parts, "\n")
}

// bodyView is the chart, the diagnosis lines and the table, with the
// anatomy panel on the right when the terminal is wide enough.
func (m *Model) bodyView(p *session.Process, d *diagnose.Diagnosis, l layout) string {
	from, to := m.window()
	u := unitFor(chartTop(p, from, to))
	title := rendered(&styleBold, "Memory") + rendered(&styleDim, " ("+u.name+") · "+m.zoomName())
	if !m.anchor.IsZero() && m.replay == nil {
		title += styleWarn.Render(" · ◀ " + elapsed(m.now().Sub(to), false) + " back")
	}
	title += "  " + seriesLegend(p, u, l.leftW-width(title)-2)
	left := []string{fitKept(title, l.leftW), m.chart.render(p, from, to, m.now(), m.store.Start())}
	if l.diagH > 0 {
		var lines []string
		if d != nil {
			lines = d.Lines()
			if len(lines) > 0 && lines[0] == d.Headline() {
				lines = lines[1:] // the banner says it already
			}
		}
		for i := range lines {
			lines[i] = textesc.String(lines[i])
		}
		left = append(left, padLines(strings.Join(diagRows(lines, l.leftW, l.diagH), "\n"), l.leftW, l.diagH))
	}
	marks := rowMarks{peak: -1}
	if d != nil {
		marks = marksOf(d)
	}
	if l.ranksH > 0 {
		left = append(left, fitKept(m.ranksLine(p), l.leftW))
	}
	left = append(left, m.table.view(m.visibleSteps(p), marks))
	leftView := stackLines(left, l.leftW, l.bodyH)
	if l.panelW == 0 {
		return leftView
	}
	total, _ := m.deviceTotal(p)
	panel := anatomyKept(diagnose.LayersOf(m.store, p), total, l.panelW, l.bodyH)
	sep := strings.TrimSuffix(strings.Repeat(rendered(&styleDim, "│")+"\n", l.bodyH), "\n")
	return joinColumns(leftView, sep, panel)
}

// diagRows are the diagnosis lines under the chart in h rows of w cells:
// each wrapped whole, never cut; those with no room left are counted on a
// last row that says where to read them (d).
func diagRows(lines []string, w, h int) []string {
	bullet := rendered(&styleDim, "  · ")
	wrapped := make([][]string, len(lines))
	total := 0
	for i, ln := range lines {
		wrapped[i] = wrapHanging(bullet, ln, w, 4)
		total += len(wrapped[i])
	}
	var out []string
	if total <= h {
		for _, rows := range wrapped {
			out = append(out, rows...)
		}
		return out
	}
	shown := 0
	for _, rows := range wrapped {
		if len(out)+len(rows) > h-1 { // the last row says what is left
			break
		}
		out = append(out, rows...)
		shown++
	}
	return append(out, rendered(&styleDim, fmt.Sprintf("  + %d more: d shows the whole diagnosis", len(lines)-shown)))
}

// maxBannerRows is how many rows a long diagnosis headline may wrap to.
const maxBannerRows = 3

// bannerLines is the diagnosis headline wrapped to the terminal (up to
// maxBannerRows rows), so that a narrow terminal loses none of it.
func (m *Model) bannerLines(d *diagnose.Diagnosis) []string {
	text := bannerText(d)
	if width(text) <= m.w {
		return []string{fitKept(text, m.w)}
	}
	lines := wrapHanging("", text, m.w, 2)
	if len(lines) > maxBannerRows {
		lines = lines[:maxBannerRows]
		lines[maxBannerRows-1] = fitKept(lines[maxBannerRows-1]+" …", m.w)
	}
	for i := range lines {
		lines[i] = fitKept(lines[i], m.w)
	}
	return lines
}

// emptyView is the screen before any process has connected.
func (m *Model) emptyView(h int) string {
	var msg string
	switch {
	case m.replay != nil:
		msg = styleBold.Render("This recording holds no training process yet.")
	case m.cfg.command != nil && m.cmdEnded != "":
		msg = strings.Join(m.endedLines(max(h-10, 3)), "\n")
	case m.cfg.command != nil:
		msg = strings.Join(m.waitingRunLines(), "\n")
	default:
		msg = strings.Join([]string{
			styleBold.Render("Waiting for a training process on " + m.socketName()),
			"",
			"Add this to your training script:",
			"",
			styleInfo.Render("    import vramscope"),
			styleInfo.Render("    vramscope.watch(model, optimizer)"),
			"",
		}, "\n") + "\n"
		if s := m.cfg.socket; s != "" && m.cfg.trainingDefault != "" && s != m.cfg.trainingDefault {
			// --socket on this side only: the hook would go to its default.
			msg += strings.Join([]string{
				"and set this socket where the training runs (without",
				"it the hook connects to " + m.cfg.trainingDefault + "):",
				"",
				styleInfo.Render("    export VRAMSCOPE_SOCKET=" + s),
				"",
			}, "\n") + "\n"
		}
		msg += styleDim.Render("No GPU at hand? Try `vramscope demo`.")
	}
	box := styleBox.Render(msg)
	return padLines(lipgloss.Place(m.w, h, lipgloss.Center, lipgloss.Center, box), m.w, h)
}

// footerView is the view's state, then the short key help.
func (m *Model) footerView() string {
	var state []string
	switch {
	case m.quitAsked:
		state = append(state, styleWarn.Render(quitNotice))
	case m.notice != "":
		state = append(state, styleWarn.Render(m.notice))
	case m.replay != nil && m.replay.paused:
		state = append(state, styleWarn.Render("⏸ PAUSED"))
	case m.paused:
		state = append(state, styleWarn.Render("⏸ PAUSED"))
	}
	if m.replay != nil {
		state = append(state, styleInfo.Render("speed "+speedNames[m.replay.speed]))
	}
	prefix := strings.Join(state, " ")
	if prefix != "" {
		prefix += "  "
	}
	return prefix + m.hintsView(m.w-width(prefix))
}

// hintsView is the footer's key hints in w cells: every binding with its
// word when it fits, else shorter words and separators, else the least
// useful ones dropped; never a binding cut in the middle.
func (m *Model) hintsView(w int) string {
	hs := m.keys.footerHints(len(m.store.Processes()))
	key := fmt.Sprintf("%d\x00%d", w, len(hs))
	for _, h := range hs {
		key += "\x00" + h.key + h.desc
	}
	return footers.get(key, func() string {
		st := m.help.Styles
		join := func(hs []hint, terse bool, sep string) string {
			parts := make([]string, len(hs))
			for i, h := range hs {
				d := h.desc
				if terse {
					d = h.terse
				}
				parts[i] = st.ShortKey.Render(h.key) + " " + st.ShortDesc.Render(d)
			}
			return strings.Join(parts, st.ShortSeparator.Render(sep))
		}
		for n := len(hs); n >= 2; n-- {
			for _, f := range []struct {
				terse bool
				sep   string
			}{{false, " • "}, {true, " • "}, {true, "  "}} {
				if s := join(hs[:n], f.terse, f.sep); width(s) <= w {
					return s
				}
			}
		}
		return join(hs[:2], true, " ")
	})
}

var footers memo[string]
