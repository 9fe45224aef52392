package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// TestHostileTextIsEscaped: a recording whose host, argv, torch, device
// name, hook version, user phase, mark and notes carry OSC 0, CSI 2J, OSC
// 52, SGR, \r, \b, C1 and DEL (testdata/recordings/hostile_text.jsonl)
// changed the tmux pane's title and wiped the view in replay. Every page is
// drawn with the escapes shown, never sent: past
// the view's own SGR colours, no control byte is left.
func TestHostileTextIsEscaped(t *testing.T) {
	evs := recording(t, "../testdata/recordings/hostile_text.jsonl")
	m := stepModel(t, evs, 160, 50)
	m = feed(t, m, evs)
	check := func(page string, view string) {
		t.Helper()
		for i, line := range strings.Split(ansi.Strip(view), "\n") {
			if !textesc.Safe(line) {
				t.Errorf("%s, line %d carries control characters: %q", page, i+1, line)
			}
		}
		// ansi.Strip drops any escape sequence, the view's own and an
		// injected one alike: count ESC bytes that start no SGR.
		if n := strings.Count(view, "\x1b") - strings.Count(view, "\x1b["); n > 0 {
			t.Errorf("%s: %d escape sequences other than CSI", page, n)
		}
		for _, seq := range []string{"\x1b[2J", "\x1b[H", "\r", "\b", "\u009b", "\x7f"} {
			if strings.Contains(view, seq) {
				t.Errorf("%s carries %q", page, seq)
			}
		}
	}
	check("main view", m.View())
	if !strings.Contains(ansi.Strip(m.View()), `\x1b]0;pwned`) {
		t.Errorf("the main view shows no escaped hostile text:\n%s", ansi.Strip(m.View()))
	}
	for _, k := range []string{"d", "a", "?"} {
		v := press(t, m, k).View()
		check("page "+k, v)
	}
}

// TestOwnDropsAreShown: the events the monitor's view skipped when it fell
// behind (feed NoteSkip notes) are shown for what they are, not as lost.
func TestOwnDropsAreShown(t *testing.T) {
	evs := recording(t, "../testdata/recordings/small.jsonl")
	m := stepModel(t, evs, 200, 40)
	skip := session.Event{At: evs[len(evs)-1].At, Conn: 1, Note: &session.Note{Kind: session.NoteSkip, Seq: 3, Count: 4096}}
	m = feed(t, m, append(evs, skip))
	top := ansi.Strip(firstLines(m.View(), 1))
	if !strings.Contains(top, "view behind: skipped 4096 events") || strings.Contains(top, "lost") {
		t.Errorf("header = %q", top)
	}
}

// TestRefusedPeersAreShown: the live view says how many connections the
// server refused.
func TestRefusedPeersAreShown(t *testing.T) {
	evs := recording(t, "../testdata/recordings/small.jsonl")
	m := stepModel(t, evs, 200, 40)
	refused := session.Event{At: evs[len(evs)-1].At, Note: &session.Note{Kind: session.NoteRefused, Text: "refused"}}
	m = feed(t, m, append(evs, refused, refused))
	if top := ansi.Strip(firstLines(m.View(), 1)); !strings.Contains(top, "refused 2 connections") {
		t.Errorf("header = %q", top)
	}
}
