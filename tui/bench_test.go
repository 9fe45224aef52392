package tui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/session"
)

// hourSteps is one hour of the demo: its steps take about 0.41 s each,
// with 50 Hz samples and five phases per step.
const hourSteps = 8800

var hourEvents []session.Event

func hour(b *testing.B) []session.Event {
	if hourEvents == nil {
		hourEvents = demoEvents(b, "warmup", hourSteps, 1)
	}
	return hourEvents
}

// benchModel is a 200×60 model over one hour of events, read through a
// Source as the live view reads them.
func benchModel(b *testing.B, keys ...string) Model {
	return press(b, live(b, hour(b), 200, 60), keys...)
}

// BenchmarkRender is the cost of one frame (what a frame tick does when
// data arrived): chart, strip, table, anatomy, header, at 200×60 with one
// hour of data, default 1 min window.
func BenchmarkRender(b *testing.B) {
	m := benchModel(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.render()
	}
}

// BenchmarkRenderWholeSession zooms out to the whole hour: the chart then
// reads the folded history of every series.
func BenchmarkRenderWholeSession(b *testing.B) {
	m := benchModel(b, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-")
	if m.zoom != len(zoomLevels) {
		b.Fatalf("zoom %d, want the whole session", m.zoom)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.render()
	}
}

// BenchmarkView is what bubbletea calls after every message: the cached
// frame.
func BenchmarkView(b *testing.B) {
	m := benchModel(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = m.View()
	}
}

// BenchmarkApplyBatches feeds 1,000-event batches through Update, as the
// source does at 1,000 events/s; b.N counts events (ns/op is per event).
func BenchmarkApplyBatches(b *testing.B) {
	evs := hour(b)
	const batch = 1000
	m := New(WithSource(&fakeSource{}))
	m, _ = update(b, m, tea.WindowSizeMsg{Width: 200, Height: 60})
	b.ReportAllocs()
	b.ResetTimer()
	next := 0
	for done := 0; done < b.N; done += batch {
		if next+batch > len(evs) {
			b.StopTimer()
			m, next = New(WithSource(&fakeSource{})), 0
			b.StartTimer()
		}
		m, _ = update(b, m, batchMsg(evs[next:next+batch]))
		next += batch
	}
}

// BenchmarkFrameTick is a frame with new data: apply nothing, render once.
func BenchmarkFrameTick(b *testing.B) {
	m := benchModel(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.dirty = true
		m, _ = update(b, m, frameTick(time.Time{}))
	}
}

// BenchmarkRenderRanks draws a frame of four ranks 1,000 steps in: the
// all-ranks line reads every rank's step peaks each frame.
func BenchmarkRenderRanks(b *testing.B) {
	m := live(b, runningOnly(demoEvents(b, "warmup", 1000, 4)), 160, 48)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.render()
	}
}

// BenchmarkRanksLine is the all-ranks line alone, for its share of a frame.
func BenchmarkRanksLine(b *testing.B) {
	m := live(b, runningOnly(demoEvents(b, "warmup", 1000, 4)), 160, 48)
	p := m.process()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = m.ranksLine(p)
	}
}
