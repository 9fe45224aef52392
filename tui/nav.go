package tui

import (
	"strconv"
	"time"
)

// window is the chart's time range.
func (m *Model) window() (from, to time.Time) {
	to = m.now()
	if !m.anchor.IsZero() && m.anchor.Before(to) {
		to = m.anchor
	}
	start := m.store.Start()
	switch {
	case m.zoom >= len(zoomLevels):
		from = start
	case to.Sub(start) < zoomLevels[m.zoom]:
		// A session shorter than the window is fitted to it: the data
		// spans the chart's width until the window is full (the first 9 s
		// used to take 12 of 78 columns of a one-minute window).
		from, to = start, maxTime(to, start.Add(minFit))
	default:
		from = to.Add(-zoomLevels[m.zoom])
	}
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	return from, to
}

// minFit is the narrowest window a young session is fitted to.
const minFit = 5 * time.Second

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fitting reports whether the window is fitted to a session shorter than
// the zoom level.
func (m *Model) fitting() bool {
	if m.zoom >= len(zoomLevels) {
		return false
	}
	to := m.now()
	if !m.anchor.IsZero() && m.anchor.Before(to) {
		to = m.anchor
	}
	return to.Sub(m.store.Start()) < zoomLevels[m.zoom]
}

// windowLen is the chart's span now.
func (m *Model) windowLen() time.Duration {
	from, to := m.window()
	return to.Sub(from)
}

// scroll moves the chart a quarter window earlier (dir < 0) or later; in
// replay it seeks the virtual clock instead.
func (m *Model) scroll(dir int) {
	d := m.windowLen() / 4
	if m.fitting() {
		d = zoomLevels[m.zoom] / 4 // the zoom's quarter, not the fitted window's
	}
	if m.replay != nil {
		m.replay.seek(time.Duration(dir)*max(d, time.Second), m.store)
		return
	}
	now := m.now()
	_, to := m.window()
	to = to.Add(time.Duration(dir) * d)
	start := m.store.Start()
	if w := m.windowLen(); to.Before(start.Add(w)) {
		to = start.Add(w) // the left edge stops at the session start
	}
	if !to.Before(now) {
		m.anchor = time.Time{} // back at the live edge: follow again
		return
	}
	m.anchor = to
}

// zoomBy changes the window one level: in (dir < 0) down to 5 s, out up to
// the whole session.
func (m *Model) zoomBy(dir int) {
	whole := m.now().Sub(m.store.Start())
	if dir > 0 {
		if m.zoom >= len(zoomLevels) {
			return
		}
		m.zoom++
		if m.zoom < len(zoomLevels) && zoomLevels[m.zoom] >= whole && whole > 0 {
			m.zoom = len(zoomLevels)
		}
		return
	}
	if m.zoom == 0 {
		return
	}
	if m.zoom == len(zoomLevels) {
		// back from "whole session" to the largest level shorter than it
		z := 0
		for z+1 < len(zoomLevels) && zoomLevels[z+1] < whole {
			z++
		}
		m.zoom = z
		return
	}
	m.zoom--
}

// zoomName says what the window is, for the chart's title.
func (m *Model) zoomName() string {
	if m.zoom >= len(zoomLevels) {
		return "whole session"
	}
	if m.fitting() {
		return "all so far" // fitted: the window grows until it is full
	}
	return "last " + durName(zoomLevels[m.zoom])
}

func durName(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return trimZero(d.Hours()) + " h"
	case d >= time.Minute:
		return trimZero(d.Minutes()) + " min"
	}
	return trimZero(d.Seconds()) + " s"
}

func trimZero(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
