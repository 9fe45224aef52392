package tui

import (
	"context"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/session"
)

// Source hands the TUI coalesced batches of events: the live socket and
// NVML, or the demo. The TUI calls Next from a tea.Cmd, never from Update.
type Source interface {
	// Next blocks until at least one event is pending or ctx is done, then
	// returns all pending events. An error ends the feed (io.EOF for a
	// source that is simply exhausted).
	Next(ctx context.Context) ([]session.Event, error)
}

// Recorder starts and stops recording from the TUI ('r' key). Its methods
// are called from a tea.Cmd, never from Update.
type Recorder interface {
	// Start begins recording into path.
	Start(path string) error
	// Stop ends the recording in progress.
	Stop() error
	// Path is the file being recorded, "" when not recording.
	Path() string
}

// batchMsg is one batch of events handed over by the Source.
type batchMsg []session.Event

// sourceErrMsg ends the live feed.
type sourceErrMsg struct{ err error }

// recordMsg reports the result of a recording toggle.
type recordMsg struct {
	path string // file now recorded to, "" when stopped
	err  error
}

// waitBatch blocks on the source in a goroutine of bubbletea's; Update
// re-issues it after each batch (glow's watchFile pattern).
func waitBatch(ctx context.Context, src Source) tea.Cmd {
	return func() tea.Msg {
		evs, err := src.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return sourceErrMsg{err}
		}
		return batchMsg(evs)
	}
}

// toggleRecording starts recording into path when rec is idle, stops it
// otherwise.
func toggleRecording(rec Recorder, recording bool, path string) tea.Cmd {
	return func() tea.Msg {
		if recording {
			if err := rec.Stop(); err != nil {
				return recordMsg{path: rec.Path(), err: err}
			}
			return recordMsg{}
		}
		if err := rec.Start(path); err != nil {
			return recordMsg{err: err}
		}
		return recordMsg{path: rec.Path()}
	}
}
