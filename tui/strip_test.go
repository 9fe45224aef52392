package tui

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// stripLine is the phase strip of a rendered view: the line two above the
// phase legend when the step row shows, else the one just above.
func stripLine(t *testing.T, v string, stepRow bool) string {
	t.Helper()
	lines := strings.Split(v, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "phase: ") {
			if stepRow {
				return lines[i-2]
			}
			return lines[i-1]
		}
	}
	t.Fatalf("no phase legend in\n%s", v)
	return ""
}

// A live run a few steps in: the strip covers the data only, not the rest
// of the one-minute window (an open phase used to run to the window's end
// and fill the whole width with its letter).
func TestStripBlankWithoutData(t *testing.T) {
	evs := demoEvents(t, "warmup", 5, 1)
	for i := len(evs) - 1; i >= 0; i-- { // cut after the last begin: a phase is open
		if m := evs[i].Msg; m != nil && m.Type == ipc.TypePhase && m.Edge == ipc.EdgeBegin {
			evs = evs[:i+1]
			break
		}
	}
	for _, sz := range []struct {
		w, h    int
		stepRow bool
	}{{160, 48, true}, {80, 24, false}} {
		m := live(t, evs, sz.w, sz.h)
		strip, _, _ := strings.Cut(stripLine(t, m.View(), sz.stepRow), "│") // the anatomy panel
		strip = strings.TrimRight(strip, " ")
		// 4 steps of ~0.4 s are under 3% of the minute: a few cells.
		if n := len([]rune(strings.TrimLeft(strip, " "))); n == 0 || n > sz.w/10 {
			t.Errorf("%d×%d: strip covers %d cells, want a few: %q", sz.w, sz.h, n, strip)
		}
	}
}
