package tui

import (
	"testing"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// recording is every event of a recording file (a fixture under
// ../testdata), read as the report reads it (record.ReadAll).
func recording(tb testing.TB, path string) []session.Event {
	tb.Helper()
	var evs []session.Event
	if _, _, err := record.ReadAll(path, func(ev session.Event) { evs = append(evs, ev) }); err != nil {
		tb.Fatal(err)
	}
	return evs
}
