package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Frames are drawn on demand: a frame tick is armed only when something
// changed (a batch arrived) or a replay is playing, and the header's
// elapsed time gets one tick a second while a process is connected. With
// no data the program sleeps: no tick, no render, no terminal write.
//
// The source is read once per frame, not once per event: after a batch,
// the next read starts at the next frame tick, so the events of a frame
// interval arrive as one batch (1,000 events/s used to come as hundreds
// of one-event messages, each a goroutine wakeup and an Update).

// clockTick redraws the header's elapsed time once a second.
type clockTick time.Time

// armFrame returns a frame tick when one is needed and none is pending.
func (m *Model) armFrame() tea.Cmd {
	playing := m.replay != nil && !m.replay.done() && !m.replay.paused
	if m.ticking || !(m.dirty || playing) {
		return nil
	}
	m.ticking = true
	return tea.Tick(time.Second/time.Duration(m.cfg.fps), func(t time.Time) tea.Msg { return frameTick(t) })
}

// armClock returns the elapsed-time tick while the live view shows a
// running clock (a connected process) and none is pending.
func (m *Model) armClock() tea.Cmd {
	if m.clocking || m.replay != nil || !m.anyConnected() {
		return nil
	}
	m.clocking = true
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return clockTick(t) })
}

func (m *Model) anyConnected() bool {
	for _, p := range m.store.Processes() {
		if p.Connected {
			return true
		}
	}
	return false
}

// onFrame is a frame tick: advance the replay, draw if anything changed.
func (m *Model) onFrame(at time.Time) tea.Cmd {
	m.ticking = false
	if m.replay != nil && !m.replay.done() && !m.replay.paused {
		m.replay.tick(at, m.store)
		m.dirty = true
	}
	if m.dirty && !m.paused {
		m.render()
	}
	var read tea.Cmd
	if m.cfg.source != nil && m.replay == nil && !m.reading && !m.srcDone {
		m.reading = true
		read = waitBatch(m.ctx, m.cfg.source)
	}
	return tea.Batch(read, m.armFrame())
}

// onClock is the once-a-second tick of the header's elapsed time.
func (m *Model) onClock() tea.Cmd {
	m.clocking = false
	if !m.paused {
		m.dirty = true
	}
	return tea.Batch(m.armFrame(), m.armClock())
}
