package tui

import (
	"fmt"
	"testing"
)

// At 80×24 and 120×40 the alloc, max and reserved lines
// merged into one block, the green alloc covering the other two. Each
// series owns (gives its colour to) cells across the chart's width.
func TestChartLinesStayDistinguishable(t *testing.T) {
	evs := demoEvents(t, "warmup", 30, 1)
	evs = evs[:len(evs)-1]
	for _, sz := range [][2]int{{80, 24}, {120, 40}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := live(t, evs, sz[0], sz[1])
			gw := m.chart.lc.GraphWidth()
			cols := make([]map[int]bool, len(chartSeries))
			for k := range cols {
				cols[k] = map[int]bool{}
			}
			for i, o := range m.chart.owner {
				if o >= 0 {
					cols[o][i%gw] = true
				}
			}
			for k, s := range chartSeries {
				if n := len(cols[k]); n < gw/3 {
					t.Errorf("%s shows in %d of %d columns", s.label, n, gw)
				}
			}
		})
	}
}
