package tui

import tea "github.com/charmbracelet/bubbletea"

// recordingErr is implemented by a Recorder that can stop by itself (a
// full disk): Err says why, nil while it records.
type recordingErr interface{ Err() error }

// watchRecording checks, after a batch, that the recording shown as
// ● REC is still going; when it stopped by itself it reports why, so the
// header trades ● REC for the error instead of showing it on a dead file.
func watchRecording(rec Recorder, path string) tea.Cmd {
	if rec == nil || path == "" {
		return nil
	}
	return func() tea.Msg {
		var err error
		if e, ok := rec.(recordingErr); ok {
			err = e.Err()
		}
		if err == nil && rec.Path() == path {
			return nil
		}
		return recordMsg{path: rec.Path(), err: err}
	}
}
