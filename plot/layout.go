package plot

import (
	"errors"
	"fmt"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is a built picture: the plot, and its legend, which Draw places
// beside the data area or below it, never on it (gonum's Legend has only
// places inside the data area, where it hid the curves).
type Chart struct {
	// Plot is the title, the axes and the data; its own legend is empty.
	Plot *gplot.Plot
	// Legend names the curves and the phases.
	Legend gplot.Legend
}

// ErrTooSmall is returned (wrapped) for a picture too small to hold the
// legend beside or below the data with room left for the data.
var ErrTooSmall = errors.New("picture too small")

// legendGap is the space between the data area and the legend.
const legendGap = vg.Length(10)

// minData is the least share of the picture's width (legend beside) or
// height (legend below) the plot keeps.
const minData = 0.5

// Draw draws the chart on c: the legend in a strip right of the plot when
// the plot keeps minData of the width, else in a strip below it when the
// plot keeps minData of the height, else ErrTooSmall.
func (ch *Chart) Draw(c draw.Canvas) error {
	plotC, legendC, err := ch.layout(c)
	if err != nil {
		return err
	}
	// The background is the whole picture's, the legend's strip too (an
	// SVG's is otherwise transparent there).
	pl := *ch.Plot
	if pl.BackgroundColor != nil {
		c.SetColor(pl.BackgroundColor)
		c.Fill(c.Rectangle.Path())
		pl.BackgroundColor = nil
	}
	pl.Draw(plotC)
	ch.Legend.Draw(legendC)
	return nil
}

// layout splits c into the plot's canvas and the legend's.
func (ch *Chart) layout(c draw.Canvas) (plotC, legendC draw.Canvas, err error) {
	size := ch.Legend.Rectangle(c).Size()
	// Legend.Draw sets each entry's text on its baseline: the last entry
	// reaches its font's descent below the legend's rectangle.
	size.Y += ch.Legend.TextStyle.FontExtents().Descent
	w, h := c.Size().X, c.Size().Y
	if strip := size.X + 2*legendGap; w-strip >= minData*w {
		plotC = draw.Crop(c, 0, -strip, 0, 0)
		data := ch.Plot.DataCanvas(plotC)
		if holds(plotC, data) && size.Y <= data.Max.Y-c.Min.Y {
			legendC = c
			legendC.Min.X, legendC.Max.X = plotC.Max.X+legendGap, c.Max.X
			legendC.Max.Y = data.Max.Y // top-aligned with the data
			return plotC, legendC, nil
		}
	}
	if strip := size.Y + 2*legendGap; h-strip >= minData*h {
		plotC = draw.Crop(c, 0, 0, strip, 0)
		data := ch.Plot.DataCanvas(plotC)
		if holds(plotC, data) && size.X <= w {
			legendC = c
			// Left-aligned with the data, or as far left as it fits.
			legendC.Min.X = min(data.Min.X, c.Max.X-size.X)
			legendC.Max.Y = c.Min.Y + legendGap + size.Y
			return plotC, legendC, nil
		}
	}
	return plotC, legendC, fmt.Errorf("%w: %.1f × %.1f in leaves no room beside or below the data for the legend (%.1f × %.1f in) and the labels",
		ErrTooSmall, w/vg.Inch, h/vg.Inch, size.X/vg.Inch, size.Y/vg.Inch)
}

// holds says whether gonum could lay out the data area inside the plot's
// canvas: where the peak's or the warmup's label is wider than the room
// for the data, it places the data area partly outside, squeezed to a
// sliver, and the legend beside it would sit on it.
func holds(plotC, data draw.Canvas) bool {
	return data.Min.X >= plotC.Min.X && data.Max.X <= plotC.Max.X && data.Min.Y >= plotC.Min.Y && data.Max.Y <= plotC.Max.Y &&
		data.Size().X > 0 && data.Size().Y > 0
}
