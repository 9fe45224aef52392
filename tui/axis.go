package tui

import (
	"fmt"
	"math"
	"time"
)

// yAxis places labels on round values of GiB.
type yAxis struct {
	top, step float64 // GiB
	rows      int     // plot rows between the x axis and the top
}

// yTicks picks a round label step for values up to maxGiB on a plot of
// rows rows, leaving at least two rows between labels.
func yTicks(maxGiB float64, rows int) yAxis {
	rows = max(rows, 1)
	labels := max(rows/2, 2)
	steps := []float64{0.125, 0.25, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 10, 15, 20, 25, 40, 50, 100, 200, 500, 1000}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if maxGiB*1.05 <= s*float64(labels) {
			step = s
			break
		}
	}
	top := math.Max(math.Ceil(maxGiB*1.05/step), 1) * step
	return yAxis{top: top, step: step, rows: rows}
}

// label is ntcharts' Y label formatter: row i holds value v; only the row
// nearest to a multiple of the step gets a label.
func (a yAxis) label(_ int, v float64) string {
	inc := a.top / float64(a.rows)
	k := math.Round(v / a.step)
	if k*a.step > a.top+inc/2 || math.Round(k*a.step/inc) != math.Round(v/inc) {
		return ""
	}
	// Plain numbers: the chart's title says GiB, as the legend does ("6G"
	// beside a GiB legend and MiB tables read as a third unit).
	return trimZero(math.Round(k*a.step*1000) / 1000)
}

// xAxis labels the plot's cells with the session's elapsed time at round
// instants.
type xAxis struct {
	from          time.Time
	window, cell  time.Duration
	step          time.Duration
	units, origin float64 // x units across the plot; origin in unix ns
}

// xTicks picks a round label step for [from, to) on cells cells, about one
// label per 12 cells. Labels count from origin (the session start).
func xTicks(from, to time.Time, units float64, origin time.Time, cells int) xAxis {
	w := to.Sub(from)
	cell := w / time.Duration(max(cells, 1))
	steps := []time.Duration{
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if s >= 12*cell {
			step = s
			break
		}
	}
	return xAxis{from: from, window: w, cell: cell, step: step, units: units, origin: float64(origin.UnixNano())}
}

// label is ntcharts' X label formatter: v is in plot units; a cell gets a
// label when a multiple of the step (counted from the origin) falls in it.
func (a xAxis) label(_ int, v float64) string {
	if a.units <= 0 || a.step <= 0 {
		return ""
	}
	t := float64(a.from.UnixNano()) + v/a.units*float64(a.window) - a.origin
	k := math.Ceil(t / float64(a.step))
	tick := k * float64(a.step)
	if tick < 0 || tick >= t+float64(a.cell) {
		return ""
	}
	return elapsed(time.Duration(tick), a.step < time.Second)
}

// elapsed formats a duration as m:ss (h:mm:ss past an hour), with tenths
// when asked.
func elapsed(d time.Duration, tenths bool) string {
	if d < 0 {
		d = 0
	}
	h, m := int(d/time.Hour), int(d/time.Minute)%60
	s := d.Seconds() - float64(int(d/time.Minute))*60
	var out string
	if h > 0 {
		out = fmt.Sprintf("%d:%02d:", h, m)
	} else {
		out = fmt.Sprintf("%d:", m)
	}
	if tenths {
		return out + fmt.Sprintf("%04.1f", s)
	}
	return out + fmt.Sprintf("%02d", int(s))
}
