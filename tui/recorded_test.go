package tui

import (
	"testing"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

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
