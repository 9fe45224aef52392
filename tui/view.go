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
	l := layout{bodyH: max(m.h-chromeRows, 6), leftW: m.w}
	if m.w >= panelMinWidth {
		l.panelW = min(max(m.w/4, 38), 48)
		l.leftW = m.w - l.panelW - 1
	}
	if m.h >= 40 {
		l.diagH = 4
	}
	if len(m.store.Processes()) > 1 {
		l.ranksH = 1
	}
	l.chartH = max(l.bodyH/2, 8)
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
	l := m.layout()
	d := m.diagnosis(p)
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
	parts := []string{m.headerView(p), fitKept(bannerText(d), m.w), body, fitKept(m.footerView(), m.w)}
	m.frame = strings.Join(parts, "\n")
}

// bodyView is the chart, the diagnosis lines and the table, with the
// anatomy panel on the right when the terminal is wide enough.
func (m *Model) bodyView(p *session.Process, d *diagnose.Diagnosis, l layout) string {
	from, to := m.window()
	title := rendered(&styleBold, "Memory") + rendered(&styleDim, " · "+m.zoomName())
	if !m.anchor.IsZero() && m.replay == nil {
		title += styleWarn.Render(" · ◀ " + elapsed(m.now().Sub(to), false) + " back")
	}
	title += "  " + seriesLegend(p, l.leftW-width(title)-2)
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
			lines[i] = rendered(&styleDim, "  · ") + textesc.String(lines[i])
		}
		left = append(left, padLines(strings.Join(lines, "\n"), l.leftW, l.diagH))
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

// emptyView is the screen before any process has connected.
func (m *Model) emptyView(h int) string {
	var msg string
	if m.replay != nil {
		msg = styleBold.Render("This recording holds no training process yet.")
	} else {
		msg = strings.Join([]string{
			styleBold.Render("Waiting for a training process on " + m.socketName()),
			"",
			"Add this to your training script:",
			"",
			styleInfo.Render("    import vramscope"),
			styleInfo.Render("    vramscope.watch(model, optimizer)"),
			"",
		}, "\n")
		if s := m.cfg.socket; s != "" && m.cfg.trainingDefault != "" && s != m.cfg.trainingDefault {
			// --socket on this side only: the hook would go to its default.
			msg += strings.Join([]string{
				"",
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
	hm := m.help
	hm.Width = max(m.w-width(prefix), 10)
	bindings := m.keys.ShortHelp()
	// The help line is the same until the size or a binding changes.
	var k strings.Builder
	fmt.Fprintf(&k, "%d\x00%s", hm.Width, prefix)
	for _, b := range bindings {
		h := b.Help()
		fmt.Fprintf(&k, "\x00%t\x00%s\x00%s", b.Enabled(), h.Key, h.Desc)
	}
	return prefix + footers.get(k.String(), func() string { return hm.ShortHelpView(bindings) })
}

var footers memo[string]
