package plot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"

	"github.com/vramscope/vramscope/export"
)

// The legend sat inside the data area, over the curves. It is drawn beside
// the data or below it, never on it: at every size Write accepts, with the
// package's own entries and with one longer than any it writes, for the
// SVG's text and the PNG's (no-break spaces) alike; a size with no room
// for it is refused. The legend's place is read from what was drawn (the
// recorded text of each entry, and its swatch's room before it); the data
// area is gonum's, for the canvas the plot was drawn on.
func TestLegendIsDrawnOutsideTheDataArea(t *testing.T) {
	s, _, _, err := export.Load("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Processes()[0]
	long := "a legend entry as long as a user might make one, and longer"
	for _, extra := range []string{"", long} {
		for _, png := range []bool{false, true} {
			for _, sz := range []struct {
				w, h vg.Length
				fits bool // else Draw returns ErrTooSmall
			}{
				{10, 5, true}, {6, 4, true}, {5, 3, true}, {4, 3, true}, {4, 6, true}, {5, 4, true}, {20, 2.5, true}, {12, 1.5, true},
				{3, 8, false}, {2.5, 6, false}, {1, 1, false}, {40, 0.5, false},
			} {
				name := fmt.Sprintf("%gx%gin png=%v extra=%q", sz.w, sz.h, png, extra)
				o := Options{Width: sz.w * vg.Inch, Height: sz.h * vg.Inch, png: png}
				ch, err := Build(s, p, o)
				if err != nil {
					t.Fatal(err)
				}
				swatch, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
				if err != nil {
					t.Fatal(err)
				}
				entries := map[string]bool{}
				if extra != "" {
					ch.Legend.Add(extra, swatch)
					entries[extra] = true
				}
				for _, e := range []string{"reserved", "allocated", "NVML process used (readings)", "zero_grad", "forward", "loss", "backward", "step"} {
					if png {
						e = strings.ReplaceAll(e, " ", "\u00a0")
					}
					entries[e] = true
				}

				rec := &recorder.Canvas{}
				c := draw.NewCanvas(rec, o.Width, o.Height)
				err = ch.Draw(c)
				if !sz.fits {
					if !errors.Is(err, ErrTooSmall) {
						t.Errorf("%s: err = %v, want ErrTooSmall", name, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				plotC, _, _ := ch.layout(c)
				data := ch.Plot.DataCanvas(plotC).Rectangle
				if data.Min.X < c.Min.X || data.Max.X > c.Max.X || data.Size().X <= 0 || data.Size().Y <= 0 {
					t.Errorf("%s: data area %v is not a room inside the picture %v", name, data, c.Rectangle)
				}

				sty := ch.Legend.TextStyle
				ext := sty.FontExtents()
				lead := ch.Legend.ThumbnailWidth + sty.Width(" ")
				drawn := 0
				for _, a := range rec.Actions {
					fs, ok := a.(*recorder.FillString)
					if !ok || !entries[fs.String] {
						continue
					}
					drawn++
					r := vg.Rectangle{
						Min: vg.Point{X: fs.Point.X - lead, Y: fs.Point.Y - ext.Descent},
						Max: vg.Point{X: fs.Point.X + sty.Width(fs.String), Y: fs.Point.Y + ext.Ascent},
					}
					if r.Min.X < data.Max.X && data.Min.X < r.Max.X && r.Min.Y < data.Max.Y && data.Min.Y < r.Max.Y {
						t.Errorf("%s: legend entry %q at %v is on the data area %v", name, fs.String, r, data)
					}
					if r.Min.X < c.Min.X || r.Max.X > c.Max.X || r.Min.Y < c.Min.Y || r.Max.Y > c.Max.Y {
						t.Errorf("%s: legend entry %q at %v is off the picture %v", name, fs.String, r, c.Rectangle)
					}
				}
				if drawn != len(entries) {
					t.Errorf("%s: %d legend entries drawn, want %d", name, drawn, len(entries))
				}
			}
		}
	}
}
