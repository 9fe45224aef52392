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

// A live run a few steps in. The strip used to cover a few cells of the
// one-minute window (and before that an open phase ran to the window's
// end); the window is now fitted to the data, so the
// strip spans the graph, ends where the data ends, and shows the phases
// apart rather than a row of b's.
func TestStripFitsAYoungSession(t *testing.T) {
	evs := demoEvents(t, "warmup", 25, 1) // 10 s
	for i := len(evs) - 1; i >= 0; i-- {  // cut after the last begin: a phase is open
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
		if _, to := m.window(); !to.Equal(m.store.Last()) {
			t.Errorf("%d×%d: the window ends %v after the newest data", sz.w, sz.h, to.Sub(m.store.Last()))
		}
		strip, _, _ := strings.Cut(stripLine(t, m.View(), sz.stepRow), "│") // the anatomy panel
		strip = strings.TrimRight(strip, " ")
		gw := m.chart.lc.GraphWidth()
		if n := len([]rune(strings.TrimLeft(strip, " "))); n < gw*9/10 {
			t.Errorf("%d×%d: strip covers %d of %d cells: %q", sz.w, sz.h, n, gw, strip)
		}
		for _, letter := range []string{"f", "b"} {
			if !strings.Contains(strip, letter) {
				t.Errorf("%d×%d: no %q in the strip: %q", sz.w, sz.h, letter, strip)
			}
		}
	}
}
