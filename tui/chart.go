package tui

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/lipgloss"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// memChart is the memory chart: a braille plot of the allocator's curves
// (and NVML's) over time, the phase strip under it and its legend. Its
// parent drives it: resize on a size change, render once per frame.
//
// ntcharts' linechart draws the axes and their labels on its canvas; the
// series are drawn by plotSeries, onto the same canvas: ntcharts'
// timeseries chart keeps whole Unix seconds (phases last milliseconds) and
// its braille drawing alone took most of the 2 ms frame budget.
type memChart struct {
	lc   linechart.Model
	w, h int
	cols []session.Column
	// The plot area is kept out of ntcharts' canvas, whose cells carry a
	// whole lipgloss.Style each (a copy per read, a fresh canvas per
	// Clear): dots are the braille bits of each graph cell, owner the
	// series drawn last into it (its colour), -1 for none. Reused.
	dots  []uint8
	owner []int8
}

// The chart's series, in the legend's order (reversed). They are drawn
// allocated first: its strokes sweep from each step's low to its peak and
// fill a block when zoomed out, so the flat counters (max allocated,
// reserved, NVML) are drawn over it and stay visible.
var chartSeries = []struct {
	label, short string
	color        lipgloss.Color
}{
	{"NVML", "nvml", colGPU},
	{"reserved", "res", colReserved},
	{"max allocated", "max", colMaxAlloc},
	{"allocated", "alloc", colAllocated},
}

// chartCurves are the curves drawn, in chartSeries order: nil where a
// series is not drawn (a CPU run's reserved is its RSS again).
func chartCurves(p *session.Process) []*session.Series {
	if p.HostRSS() {
		return []*session.Series{p.GPU, nil, p.MaxAllocated, p.Allocated}
	}
	return []*session.Series{p.GPU, p.Reserved, p.MaxAllocated, p.Allocated}
}

// allocSeries and maxSeries are the allocated and max allocated curves'
// indexes in chartSeries.
const (
	allocSeries = 3
	maxSeries   = 2
)

func newMemChart() *memChart {
	c := &memChart{lc: linechart.New(10, 5, 0, 1, 0, 1)}
	c.lc.SetXStep(1)
	c.lc.SetYStep(1)
	c.lc.AxisStyle = styleDim
	c.lc.LabelStyle = styleDim
	return c
}

// layout splits the chart's height: the plot (axes included), then the
// phase strip, the step row (when tall enough) and the phase legend.
func (c *memChart) layout() (plot, stepRow int) {
	if c.h >= 16 {
		stepRow = 1
	}
	return max(c.h-2-stepRow, 4), stepRow
}

// resize sets the size of the whole chart block.
func (c *memChart) resize(w, h int) {
	c.w, c.h = w, h
	plot, _ := c.layout()
	c.lc.Resize(w, plot)
}

// render draws p over [from, to); now is the newest instant with data
// (open phases run up to it, not to the window's end), origin the session
// start the time labels count from. It returns exactly c.h lines of c.w
// cells.
func (c *memChart) render(p *session.Process, from, to, now, origin time.Time) string {
	series := chartCurves(p)
	top := chartTop(p, from, to)
	u := unitFor(top)
	plot, stepRow := c.layout()
	ticks := yTicks(float64(top)/u.bytes, plot-2)
	c.lc.YLabelFormatter = ticks.label
	c.lc.SetYRange(0, ticks.top)
	c.lc.SetViewYRange(0, ticks.top)
	c.lc.UpdateGraphSizes()
	gw := max(c.lc.GraphWidth(), 1)
	c.lc.XLabelFormatter = xTicks(from, to, float64(gw), origin, gw).label
	c.lc.SetXRange(0, float64(gw))
	c.lc.SetViewXRange(0, float64(gw))
	c.clearAxes()
	c.lc.DrawXYAxisAndLabel()
	c.clearPlot()
	for k := len(series) - 1; k >= 0; k-- {
		if s := series[k]; s != nil && s.Len() > 0 {
			c.cols = s.Columns(c.cols, from, to, 2*gw) // one column per braille dot
			c.plotSeries(c.cols, ticks.top*u.bytes, int8(k))
		}
	}

	var b strings.Builder
	b.Grow(c.w * c.h * 4)
	c.view(&b)
	left := c.lc.Origin().X + 1
	b.WriteByte('\n')
	b.WriteString(phaseStrip(p.Spans(), from, to, now, left, c.lc.GraphWidth(), c.w))
	if stepRow > 0 {
		b.WriteByte('\n')
		b.WriteString(stepLabels(p.Spans(), from, to, left, c.lc.GraphWidth(), c.w))
	}
	b.WriteByte('\n')
	b.WriteString(phaseLegendKept(visibleSpans(p.Spans(), from, to), c.w))
	return b.String()
}

// brailleBits are the dot bits of a braille cell by column, then row from
// the top (U+2800 + bits).
var brailleBits = [2][4]uint8{{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}}

const gib = float64(1 << 30)

// chartUnit is the unit of the chart's axis and legend: GiB, or MiB for
// a window whose top is under 1 GiB (a 0.4 GiB CPU run read 0.1, 0.2 …).
type chartUnit struct {
	name  string
	bytes float64
}

var (
	unitGiB = chartUnit{"GiB", gib}
	unitMiB = chartUnit{"MiB", float64(session.MiB)}
)

// unitFor is the unit for a window whose curves top at top bytes.
func unitFor(top int64) chartUnit {
	if top > 0 && float64(top) < gib {
		return unitMiB
	}
	return unitGiB
}

// chartTop is the largest value of the drawn curves in [from, to).
func chartTop(p *session.Process, from, to time.Time) int64 {
	top := int64(0)
	for _, s := range chartCurves(p) {
		if s == nil {
			continue
		}
		if v, ok := s.MaxBetween(from, to); ok {
			top = max(top, v)
		}
	}
	return top
}

// unitText is a legend figure in unit u, without the unit (the title
// says it): "4.4" GiB, "412" MiB.
func unitText(b session.Bytes, u chartUnit) string {
	if u == unitMiB {
		return b.MiBString()
	}
	return strings.TrimSuffix(gibText(b), " GiB")
}

// seriesLegend names each series with its newest value, in w cells or
// fewer (short names when the long ones do not fit).
func seriesLegend(p *session.Process, u chartUnit, w int) string {
	var items, short []string
	series := chartCurves(p)
	for k := len(series) - 1; k >= 0; k-- {
		if series[k] == nil {
			continue
		}
		_, v, ok := series[k].Last()
		if !ok {
			continue
		}
		label, abbr := chartSeries[k].label, chartSeries[k].short
		if k == 0 && p.GPUSource != "" {
			label = "NVML " + p.GPUSource
		}
		if w, _ := ipc.WordsOf(ipc.SourceKind(&p.Hello)); w.Figure != "" { // allocated = reserved: one figure and its peak
			label = map[int]string{maxSeries: w.Peak, allocSeries: w.Figure}[k]
			abbr = label
		}
		mark := rendered(&seriesStyles[k], "━")
		// The title says the unit, once for the axis and the legend.
		val := rendered(&styleBold, unitText(session.Bytes(v), u))
		items = append(items, mark+" "+label+" "+val)
		short = append(short, mark+" "+abbr+" "+val)
	}
	if s := strings.Join(items, "   "); width(s) <= w {
		return s
	}
	for n := len(short); n > 0; n-- { // drop series from the end, never cut one
		if s := strings.Join(short[:n], " "); width(s) <= w {
			return s
		}
	}
	return ""
}

// seriesStyles are the series' colours as styles, in chartSeries order.
var seriesStyles = func() []lipgloss.Style {
	st := make([]lipgloss.Style, len(chartSeries))
	for i, s := range chartSeries {
		st[i] = lipgloss.NewStyle().Foreground(s.color)
	}
	return st
}()

var legends memo[fitKey]

// phaseLegendKept is phaseLegend fitted to w cells, drawn again only when
// the user phases in the window change.
func phaseLegendKept(spans []session.Span, w int) string {
	var names []string
	for i := range spans {
		if sp := &spans[i]; sp.User && len(names) < 4 && !slices.Contains(names, sp.Name) {
			names = append(names, sp.Name)
		}
	}
	return legends.get(fitKey{strconv.Itoa(len(names)) + "\x00" + strings.Join(names, "\x00"), w}, func() string { return fit(phaseLegend(spans), w) })
}

// phaseLegend lists the letters of the strip: the automatic phases, then
// the user phases among spans (those in the window: the whole store holds
// up to 20k spans).
func phaseLegend(spans []session.Span) string {
	parts := []string{"phase:"}
	for _, n := range []string{"zero_grad", "forward", "loss", "backward", "step"} {
		l := phaseLooks[n]
		parts = append(parts, l.style.Render(string(l.letter))+" "+n)
	}
	seen := map[string]bool{}
	for i := range spans {
		sp := &spans[i]
		if sp.User && !seen[sp.Name] && len(seen) < 4 {
			seen[sp.Name] = true
			l := lookOf(sp.Name, true)
			parts = append(parts, l.style.Render(string(l.letter))+" "+textesc.String(sp.Name))
		}
	}
	return styleDim.Render(parts[0]) + " " + strings.Join(parts[1:], "  ")
}
