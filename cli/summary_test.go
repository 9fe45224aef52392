package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// TestSummaryNamesEachLoss: record said "163840 lost" for events its own
// view skipped though the recording had them, and "1024 clients … 0 lost"
// after 2,000 sessions of which 343 were refused. The summary now counts
// every client, and names the view's skips and
// the refused connections apart from loss.
func TestSummaryNamesEachLoss(t *testing.T) {
	s := session.New(session.WithMaxProcesses(2))
	at := time.Unix(1763794800, 0)
	for c := uint64(1); c <= 5; c++ {
		s.Apply(session.Event{At: at, Conn: c, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, Session: string(rune('a' + c)), PID: int(c)}})
		s.Apply(session.Event{At: at, Conn: c, Note: &session.Note{Kind: session.NoteDisconnect}})
	}
	s.Apply(session.Event{At: at, Conn: 1, Note: &session.Note{Kind: session.NoteSkip, Count: 163840}})
	s.Apply(session.Event{At: at, Note: &session.Note{Kind: session.NoteRefused, Text: "refused"}})
	line := summary(s, "/nonexistent", 10, 0)
	for _, want := range []string{"5 clients", " 0 lost", "1 refused connection,", "163840 skipped by the view (recorded)", " 0 bad messages; wrote /nonexistent "} {
		if !strings.Contains(line, want) {
			t.Errorf("summary lacks %q: %s", want, line)
		}
	}
}
