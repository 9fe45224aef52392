package tui

import (
	"errors"
	"io"
	"testing"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// recording reads every event of a recording file (a fixture under
// ../testdata).
func recording(tb testing.TB, path string) []session.Event {
	tb.Helper()
	r, err := record.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	var evs []session.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			tb.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

// recordedEvents is every event of a recording, read as report reads it
// (record.ReadAll).
func recordedEvents(t *testing.T, path string) []session.Event {
	t.Helper()
	var evs []session.Event
	if _, _, err := record.ReadAll(path, func(ev session.Event) { evs = append(evs, ev) }); err != nil {
		t.Fatal(err)
	}
	return evs
}
