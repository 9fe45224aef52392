package tui

import (
	"strings"
	"time"

	tslc "github.com/NimbleMarkets/ntcharts/linechart/timeserieslinechart"
	"github.com/charmbracelet/lipgloss"

	"github.com/vramscope/vramscope/session"
)

// memChart is the memory chart: a braille time-series plot of the
// allocator's curves (and NVML's), the phase strip under it and a legend.
// Its parent drives it: resize on a size change, render once per frame.
type memChart struct {
	lc   tslc.Model
	w, h int
	cols []session.Column
	dots int // braille columns of the plot (two per cell)
}

// The chart's series, drawn in name order: the allocated curve last, on top.
var chartSeries = []struct {
	name, label, short string
	color              lipgloss.Color
}{
	{"1gpu", "NVML", "nvml", colGPU},
	{"2reserved", "reserved", "res", colReserved},
	{"3max", "max allocated", "max", colMaxAlloc},
	{"4alloc", "allocated", "alloc", colAllocated},
}

func newMemChart() *memChart {
	c := &memChart{lc: tslc.New(10, 5)}
	c.lc.AutoMinX, c.lc.AutoMaxX, c.lc.AutoMinY, c.lc.AutoMaxY = false, false, false, false
	c.lc.SetXStep(1)
	c.lc.SetYStep(1)
	c.lc.AxisStyle = styleDim
	c.lc.LabelStyle = styleDim
	for _, s := range chartSeries {
		c.lc.SetDataSetStyle(s.name, lipgloss.NewStyle().Foreground(s.color))
	}
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

// render draws p over [from, to); origin is the session start the time
// labels count from. It returns exactly c.h lines of c.w cells.
func (c *memChart) render(p *session.Process, from, to, origin time.Time) string {
	series := []*session.Series{p.GPU, p.Reserved, p.MaxAllocated, p.Allocated}
	top := int64(0)
	for _, s := range series {
		if v, ok := s.MaxBetween(from, to); ok {
			top = max(top, v)
		}
	}
	plot, stepRow := c.layout()
	ticks := yTicks(float64(top)/gib, plot-2)
	c.lc.YLabelFormatter = ticks.label
	c.lc.SetYRange(0, ticks.top)
	c.lc.SetViewYRange(0, ticks.top)
	// The plot's x axis counts xUnit "seconds" per braille dot column (ntcharts
	// keeps whole Unix seconds, too coarse for phases of a few ms): one data
	// column per dot, two dots per cell.
	c.lc.UpdateGraphSizes()
	c.dots = 2 * max(c.lc.GraphWidth(), 1)
	span := time.Unix(int64(c.dots*xUnit), 0)
	c.lc.XLabelFormatter = xTicks(from, to, float64(c.dots*xUnit), origin, c.lc.GraphWidth()).label
	c.lc.SetTimeRange(time.Unix(0, 0), span)
	c.lc.SetViewTimeRange(time.Unix(0, 0), span)
	c.lc.ClearAllData()
	for k, s := range series {
		c.push(chartSeries[k].name, s, from, to)
	}
	c.lc.DrawBrailleAll()
	if c.lc.GraphWidth() > 0 && len(p.Spans()) == 0 && p.Allocated.Len() == 0 {
		c.lc.DrawXYAxisAndLabel() // no data set: DrawBrailleAll drew nothing
	}

	var b strings.Builder
	b.WriteString(canvasView(&c.lc.Canvas))
	left := c.lc.Origin().X + 1
	b.WriteByte('\n')
	b.WriteString(phaseStrip(p.Spans(), from, to, left, c.lc.GraphWidth(), c.w))
	if stepRow > 0 {
		b.WriteByte('\n')
		b.WriteString(stepLabels(p.Spans(), from, to, left, c.lc.GraphWidth(), c.w))
	}
	b.WriteByte('\n')
	b.WriteString(fit(phaseLegend(p.Spans()), c.w))
	return b.String()
}

// push feeds one series at the plot's resolution. Each braille column gets
// its minimum and maximum (Series.Columns keeps them, so no peak is lost
// however far out the view is zoomed), in the order that joins the
// previous column with the shortest stroke.
func (c *memChart) push(name string, s *session.Series, from, to time.Time) {
	if s.Len() == 0 {
		return
	}
	c.cols = s.Columns(c.cols, from, to, c.dots)
	prev := -1.0
	for i, col := range c.cols {
		if !col.Has {
			continue
		}
		lo, hi := float64(col.Min)/gib, float64(col.Max)/gib
		a, b := lo, hi
		if prev > hi {
			a, b = hi, lo
		}
		at := time.Unix(int64(xUnit*i), 0)
		c.lc.PushDataSet(name, tslc.TimePoint{Time: at, Value: a})
		if b != a {
			c.lc.PushDataSet(name, tslc.TimePoint{Time: at.Add(time.Second), Value: b})
		}
		prev = float64(col.Last) / gib
	}
}

const gib = float64(1 << 30)

// xUnit is how many x-axis units one braille dot column spans: the minimum
// of a column sits on its first unit, the maximum on the second, and both
// round to the same dot.
const xUnit = 4

// seriesLegend names each series with its newest value, in w cells or
// fewer (short names when the long ones do not fit).
func seriesLegend(p *session.Process, w int) string {
	var items, short []string
	series := []*session.Series{p.GPU, p.Reserved, p.MaxAllocated, p.Allocated}
	for k := len(series) - 1; k >= 0; k-- {
		_, v, ok := series[k].Last()
		if !ok {
			continue
		}
		label, abbr := chartSeries[k].label, chartSeries[k].short
		if k == 0 && p.GPUSource != "" {
			label = "NVML " + p.GPUSource
		}
		mark := lipgloss.NewStyle().Foreground(chartSeries[k].color).Render("━")
		val := styleBold.Render(gibText(session.Bytes(v)))
		items = append(items, mark+" "+label+" "+val)
		short = append(short, mark+" "+abbr+" "+val)
	}
	if s := strings.Join(items, "   "); lipgloss.Width(s) <= w {
		return s
	}
	return truncate(strings.Join(short, " "), w)
}

// phaseLegend lists the letters of the strip: the automatic phases, then
// the user phases seen.
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
			parts = append(parts, l.style.Render(string(l.letter))+" "+sp.Name)
		}
	}
	return styleDim.Render(parts[0]) + " " + strings.Join(parts[1:], "  ")
}

// fit cuts s to w cells and pads it to exactly w.
func fit(s string, w int) string {
	if lipgloss.Width(s) > w {
		s = truncate(s, w)
	}
	return s + strings.Repeat(" ", max(w-lipgloss.Width(s), 0))
}
