package tui

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Lines cut with "…" at every width (the warmup banner,
// the footer's keys, the recording's name, the diagnosis lines, the
// anatomy's activations note). Every screen of the three demos, running,
// paused and recording, at 80×24, 120×40 and 200×60: no line is cut.
func TestNoLineIsCut(t *testing.T) {
	dump := os.Getenv("VRAMSCOPE_DUMP") // a folder to write every screen to
	for _, sc := range []string{"warmup", "leak", "steady"} {
		evs := demoEvents(t, sc, 40, 1)
		evs = evs[:len(evs)-1] // still running
		for _, sz := range [][2]int{{80, 24}, {120, 40}, {200, 60}} {
			base := live(t, evs, sz[0], sz[1], WithRecorder(&fakeRecorder{}, "vramscope-20261125-023349.jsonl.gz"))
			for _, state := range []string{"running", "paused", "recording"} {
				m := base
				switch state {
				case "paused":
					m = press(t, m, "space")
				case "recording":
					m, _ = update(t, m, recordMsg{path: "/home/ana/runs/vramscope-20261125-023349.jsonl.gz"})
				}
				for _, k := range []string{"", "d", "a", "?"} {
					mm := m
					if k != "" {
						mm = press(t, m, k)
					}
					v := mm.View()
					if dump != "" {
						os.WriteFile(fmt.Sprintf("%s/%s-%dx%d-%s-%s.txt", dump, sc, sz[0], sz[1], state, k), []byte(v), 0o644)
					}
					for i, ln := range strings.Split(v, "\n") {
						if strings.Contains(ln, "…") {
							t.Errorf("%s %dx%d %s %q: line %d is cut: %q", sc, sz[0], sz[1], state, k, i+1, ln)
						}
					}
				}
			}
		}
	}
}
