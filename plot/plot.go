// Package plot draws one training process's memory as a picture to paste
// into an issue or a pull request (SVG, PNG or PDF), with
// gonum.org/v1/plot: allocated, reserved and the driver's figure over time,
// the phases shaded, the warmup marked and the session peak annotated.
// docs/plot.md shows an example.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"strings"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Formats are the output formats, by file extension.
var Formats = []string{"svg", "png", "pdf"}

// Options size and title the picture.
type Options struct {
	// Width and Height are the picture's size (default 10 × 5 inches; a PNG
	// is rendered at 96 dpi). Write refuses one with no room for the legend
	// beside or below the data (ErrTooSmall).
	Width, Height vg.Length
	// Title replaces the default title (the process and the file).
	Title string
	// Source names the recording, for the default title.
	Source string

	png bool // Write sets it: text spaces become no-break spaces (below)
}

// ErrNoMemoryData is returned (wrapped) for a process with no allocator or
// NVML reading: there is nothing to draw, and an empty chart with a y axis
// of 0 to 1.2e-09 GiB was all it used to give.
var ErrNoMemoryData = errors.New("no memory data")

// phaseColors are the shading of the automatic phases (light, so the
// curves stay readable); user phases share a grey.
var phaseColors = map[string]color.NRGBA{
	"zero_grad": {R: 0x99, G: 0x99, B: 0x99, A: 0x30},
	"forward":   {R: 0x4c, G: 0x9b, B: 0xe8, A: 0x30},
	"loss":      {R: 0xf2, G: 0xb7, B: 0x05, A: 0x38},
	"backward":  {R: 0xe8, G: 0x5d, B: 0x4c, A: 0x30},
	"step":      {R: 0x5c, G: 0xb8, B: 0x5c, A: 0x30},
}

var userColor = color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0x20}

// Curve colours.
var (
	allocColor    = color.NRGBA{R: 0x1f, G: 0x4e, B: 0xa8, A: 0xff}
	reservedColor = color.NRGBA{R: 0x8e, G: 0x44, B: 0xad, A: 0xff}
	nvmlColor     = color.NRGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
	peakColor     = color.NRGBA{R: 0xd0, G: 0x10, B: 0x10, A: 0xff}
)

// gib and mib are the y units: GiB, or MiB for a process whose curves
// top under 1 GiB (a small CPU run's axis read 0.1, 0.2 GiB).
const (
	gib = float64(1 << 30)
	mib = float64(1 << 20)
)

// yUnit is the unit of a plot whose curves top at top bytes, and its name.
func yUnit(top int64) (float64, string) {
	if top > 0 && float64(top) < gib {
		return mib, "MiB"
	}
	return gib, "GiB"
}

// Build draws process p of store s.
func Build(s *session.Store, p *session.Process, o Options) (*Chart, error) {
	if p.Allocated.Len() == 0 && p.Reserved.Len() == 0 && p.GPU.Len() == 0 {
		return nil, fmt.Errorf("%s: %w (no allocator or NVML reading of it): nothing to plot", p.Label(), ErrNoMemoryData)
	}
	d := diagnose.Diagnose(s, p)
	t0, t1 := window(p)
	x := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	txt := func(s string) string {
		s = textesc.String(s) // a raw C0 byte is not XML, and the SVG would not open
		if o.png {
			// The PNG renderer kerns "A A" to "AA" ("NVIDIAA100"): a
			// no-break space has no kerning pairs.
			return strings.ReplaceAll(s, " ", "\u00a0")
		}
		return s
	}

	pl := gplot.New()
	pl.Title.Text = o.Title
	if pl.Title.Text == "" {
		pl.Title.Text = title(p, o.Source, &d)
	}
	pl.Title.Text = txt(pl.Title.Text)
	pl.X.Label.Text = "seconds"
	unit, unitName := yUnit(max(p.Reserved.Max(), p.GPU.Max(), p.MaxAllocated.Max(), p.Allocated.Max()))
	pl.Y.Label.Text = unitName
	pl.Y.Min = 0
	pl.Legend.Top, pl.Legend.Left = true, true // Chart.Draw places it outside the data area
	pl.Legend.TextStyle.Font.Size = vg.Points(9)
	pl.Add(plotter.NewGrid())
	// The training, not the process's start-up: NVML sees the process
	// (CUDA context, loading) seconds before the hook's first phase.
	pad := max(t1.Sub(t0).Seconds()*0.01, 0.001)
	defer func() { pl.X.Min, pl.X.Max = -pad, x(t1)+pad }() // Add widens the range to the data

	// The y range keeps two rows of labels (the peak's, the warmup's)
	// above every curve: they used to sit on the data.
	height := o.Height
	if height <= 0 {
		height = 5 * vg.Inch
	}
	dataMax := float64(max(p.Reserved.Max(), p.GPU.Max(), p.MaxAllocated.Max(), p.Allocated.Max(), 1)) / unit
	area := float64(height.Points()) - 60 // less the title and the x axis
	frac := min(max((area-2*row)/area, 0.3), 0.9)
	top := dataMax / frac
	pl.Y.Max = top
	rowY := row / area * top // one label row in the y unit
	if err := shadePhases(pl, p, x, dataMax+0.5*rowY, txt); err != nil {
		return nil, err
	}
	right := x(t1) * 0.6 // labels past this point read leftwards
	if err := markWarmup(pl, p, &d, x, dataMax+2*rowY, right, txt); err != nil {
		return nil, err
	}
	curves := []struct {
		s    *session.Series
		name string
		c    color.Color
	}{
		{p.Reserved, "reserved", reservedColor},
		{p.Allocated, "allocated", allocColor},
	}
	if w, _ := ipc.WordsOf(ipc.SourceKind(&p.Hello)); w.Figure != "" { // allocated = reserved: drawn once
		curves = curves[1:]
		curves[0].name = w.Figure
	}
	for _, c := range curves {
		xys := steps(c.s, x, x(t1), unit)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", c.name, err)
		}
		l.Color, l.Width = c.c, vg.Points(1.2)
		pl.Add(l)
		pl.Legend.Add(txt(c.name), l)
	}
	// NVML's process figure is read about once a second: each reading is
	// a point at its moment. Held as a line until the next one, it drew a
	// flat line below reserved while the allocator grew.
	if xys := points(p.GPU, x, unit); len(xys) > 0 {
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, fmt.Errorf("plot NVML: %w", err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: nvmlColor, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
		pl.Add(sc)
		pl.Legend.Add(txt(nvmlName(p)+" (readings)"), sc)
	}
	if err := annotatePeak(pl, p, &d, x, unit, right, dataMax+rowY, txt); err != nil {
		return nil, err
	}
	ch := &Chart{Plot: pl, Legend: pl.Legend}
	pl.Legend = gplot.NewLegend()
	return ch, nil
}

// row is the height of one label row, in points.
const row = 13.0

// points are a series' readings as points.
func points(s *session.Series, x func(time.Time) float64, unit float64) plotter.XYs {
	var xys plotter.XYs
	s.Points(func(at time.Time, v int64) { xys = append(xys, plotter.XY{X: x(at), Y: float64(v) / unit}) })
	return xys
}

// Write draws process p of store s in format ("svg", "png" or "pdf") to w.
func Write(w io.Writer, format string, s *session.Store, p *session.Process, o Options) error {
	format = strings.ToLower(strings.TrimPrefix(format, "."))
	known := false
	for _, f := range Formats {
		known = known || f == format
	}
	if !known {
		return fmt.Errorf("unknown picture format %q: want svg, png or pdf", format)
	}
	o.png = format == "png"
	ch, err := Build(s, p, o)
	if err != nil {
		return err
	}
	width, height := o.Width, o.Height
	if width <= 0 {
		width = 10 * vg.Inch
	}
	if height <= 0 {
		height = 5 * vg.Inch
	}
	c, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return fmt.Errorf("render %s: %w", format, err)
	}
	if err := ch.Draw(draw.New(c)); err != nil {
		return err
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("write %s: %w", format, err)
	}
	return nil
}

// window is the time the picture covers: from the hook's first phase (or
// first allocator reading) to its last reading.
func window(p *session.Process) (from, to time.Time) {
	from, to = p.First, p.Last
	if at, _, ok := p.Allocated.First(); ok {
		from = at
	}
	if sp := p.Spans(); len(sp) > 0 && sp[0].Start.Before(from) {
		from = sp[0].Start
	}
	if at, _, ok := p.Allocated.Last(); ok && at.After(from) {
		to = at
	}
	if sp := p.Spans(); len(sp) > 0 && sp[len(sp)-1].End.After(to) {
		to = sp[len(sp)-1].End
	}
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	return from, to
}

func title(p *session.Process, source string, d *diagnose.Diagnosis) string {
	t := p.Label()
	if c := p.Hello.CUDA; c != nil {
		t += " · " + c.Name
	}
	if source != "" {
		t = source + " · " + t
	}
	return t + " · " + string(d.Pattern)
}

func nvmlName(p *session.Process) string {
	if p.GPUSource == "device" {
		return "NVML device used"
	}
	return "NVML process used"
}

// steps turns a series into a step line: a value holds until the next,
// and the last one until end (the reading in effect when the run ended).
func steps(s *session.Series, x func(time.Time) float64, end, unit float64) plotter.XYs {
	var xys plotter.XYs
	s.Points(func(at time.Time, v int64) {
		px, py := x(at), float64(v)/unit
		if n := len(xys); n > 0 {
			xys = append(xys, plotter.XY{X: px, Y: xys[n-1].Y})
		}
		xys = append(xys, plotter.XY{X: px, Y: py})
	})
	if n := len(xys); n > 0 && xys[n-1].X < end {
		xys = append(xys, plotter.XY{X: end, Y: xys[n-1].Y})
	}
	return xys
}

// shadePhases draws each finished phase as a light band, one legend entry
// per phase name.
func shadePhases(pl *gplot.Plot, p *session.Process, x func(time.Time) float64, top float64, txt func(string) string) error {
	seen := map[string]bool{}
	for i := range p.Spans() {
		sp := &p.Spans()[i]
		if sp.Open() {
			continue
		}
		c, ok := phaseColors[sp.Name]
		if sp.User || !ok {
			c = userColor
		}
		x0, x1 := x(sp.Start), x(sp.End)
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: top}, {X: x0, Y: top}})
		if err != nil {
			return fmt.Errorf("shade %s: %w", sp.Name, err)
		}
		band.Color, band.LineStyle.Width = c, 0
		pl.Add(band)
		if !seen[sp.Name] && !sp.User {
			seen[sp.Name] = true
			pl.Legend.Add(txt(sp.Name), band)
		}
	}
	return nil
}

// markWarmup draws a dashed line where the steady state begins, labelled
// with the warmup's change, when the diagnosis found a warmup.
func markWarmup(pl *gplot.Plot, p *session.Process, d *diagnose.Diagnosis, x func(time.Time) float64, labelY, right float64, txt func(string) string) error {
	if d.Pattern != diagnose.PatternWarmup || d.SteadyFrom < 0 {
		return nil
	}
	var at time.Time
	for _, sp := range p.StepPeaks() {
		if sp.Index == d.SteadyFrom {
			at = sp.Start
		}
	}
	if at.IsZero() {
		return nil
	}
	l, err := plotter.NewLine(plotter.XYs{{X: x(at), Y: 0}, {X: x(at), Y: labelY}})
	if err != nil {
		return fmt.Errorf("warmup line: %w", err)
	}
	l.Color, l.Width = color.NRGBA{R: 0x20, G: 0x80, B: 0x20, A: 0xff}, vg.Points(1)
	l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	pl.Add(l)
	change := session.Bytes(d.WarmupChange)
	sign := "+"
	if d.WarmupChange < 0 {
		change, sign = -change, "−"
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{
		XYs:    plotter.XYs{{X: x(at), Y: labelY}},
		Labels: []string{txt(fmt.Sprintf(" ← warmup | steady from step %d (%s%s) ", d.SteadyFrom, sign, change.Human()))},
	})
	if err != nil {
		return fmt.Errorf("warmup label: %w", err)
	}
	alignLabel(lab, x(at), right)
	pl.Add(lab)
	return nil
}

// annotatePeak marks the session's allocated peak: the moment the
// allocator's max_allocated counter first reached its highest value (the
// counter rises exactly when the peak happens; on the host, first came
// within diagnose.PeakTie of it, as the diagnosis places it), labelled
// with the size and where the diagnosis places it.
func annotatePeak(pl *gplot.Plot, p *session.Process, d *diagnose.Diagnosis, x func(time.Time) float64, unit, right, labelY float64, txt func(string) string) error {
	if !d.Peak.Allocated.Known() {
		return nil
	}
	top := p.MaxAllocated.Max()
	tie := int64(diagnose.PeakTie(p))
	var at time.Time
	p.MaxAllocated.Points(func(t time.Time, v int64) {
		if v+tie >= top && at.IsZero() {
			at = t
		}
	})
	if at.IsZero() {
		return nil
	}
	y := float64(top) / unit
	dot, err := plotter.NewScatter(plotter.XYs{{X: x(at), Y: y}})
	if err != nil {
		return fmt.Errorf("peak marker: %w", err)
	}
	dot.GlyphStyle = draw.GlyphStyle{Color: peakColor, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	pl.Add(dot)
	where := ""
	if d.Peak.Step >= 0 {
		where = " · " + diagnose.Where(d.Peak.Step, d.Peak.Phase)
	}
	// The label sits in the row above every curve, a thin line down to
	// the marker.
	lead, err := plotter.NewLine(plotter.XYs{{X: x(at), Y: y}, {X: x(at), Y: labelY}})
	if err != nil {
		return fmt.Errorf("peak leader: %w", err)
	}
	lead.Color, lead.Width = peakColor, vg.Points(0.6)
	pl.Add(lead)
	lab, err := plotter.NewLabels(plotter.XYLabels{
		XYs:    plotter.XYs{{X: x(at), Y: labelY}},
		Labels: []string{txt(fmt.Sprintf("  peak %s%s  ", peakText(p, top), where))},
	})
	if err != nil {
		return fmt.Errorf("peak label: %w", err)
	}
	lab.TextStyle[0].Color = peakColor
	alignLabel(lab, x(at), right)
	pl.Add(lab)
	return nil
}

// peakText is the session peak as the counter's highest read: exact,
// unless the hook resets its counters at each read and messages were lost
// (a lost read took its interval's peak with it): then a lower bound.
func peakText(p *session.Process, top int64) string {
	if h := p.Hello.Hook; h != nil && (h.ExactPeaks || h.ResetPeaks) && p.Lost > 0 {
		return "≥ " + session.Bytes(top).Human() + " (not exact: messages lost)"
	}
	return session.Bytes(top).Human()
}

// alignLabel makes a label read leftwards from its point when the point is
// far right, so it stays inside the picture.
func alignLabel(l *plotter.Labels, at, right float64) {
	if at > right {
		l.TextStyle[0].XAlign = text.XRight
	}
}
