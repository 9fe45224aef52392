package tui

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/vramscope/vramscope/session"
)

// goldenRun runs the real program under teatest on the warmup demo (30
// steps, still running: no goodbye), types keys, quits, and compares the
// final frame with testdata/<test name>.golden (go test -update rewrites).
func goldenRun(t *testing.T, w, h int, keys ...string) {
	evs := demoEvents(t, "warmup", 30, 1)
	evs = evs[:len(evs)-1] // drop the goodbye: the run is in progress
	goldenEvents(t, evs, "29 ", w, h, keys...)
}

// goldenEvents is goldenRun over any events: it waits for wait on the
// screen before typing keys.
func goldenEvents(t *testing.T, evs []session.Event, wait string, w, h int, keys ...string) {
	t.Helper()
	goldenWith(t, evs, wait, w, h, nil, keys...)
}

// goldenWith is goldenEvents with the model's options added to the
// goldens' own.
func goldenWith(t *testing.T, evs []session.Event, wait string, w, h int, opts []Option, keys ...string) {
	t.Helper()
	src := &fakeSource{batches: [][]session.Event{evs}} // one batch: the final frame cannot race the feed
	m := New(append([]Option{WithSource(src), WithClock(fixedClock(evs)), WithDevice("simulated", simDevices()),
		WithSocket("/tmp/vramscope-1000/vramscope.sock")}, opts...)...)
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(wait)) },
		teatest.WithDuration(5*time.Second))
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(Model)
	golden.RequireEqual(t, []byte(fm.View()))
}

func TestGoldenWarmup80x24(t *testing.T) { goldenRun(t, 80, 24) }

// The wide view, zoomed to 10 s and scrolled to the first steps: the warmup
// rows and the peak row are highlighted.
func TestGoldenWarmup160x48(t *testing.T) { goldenRun(t, 160, 48, "+", "+", "home") }

func TestGoldenHelp80x24(t *testing.T) { goldenRun(t, 80, 24, "?") }

// The diagnosis page at 80×24: every line wrapped, none cut.
func TestGoldenDiag80x24(t *testing.T) { goldenRun(t, 80, 24, "d") }

// The anatomy page at 80×24, where the panel has no room beside the chart.
func TestGoldenAnatomy80x24(t *testing.T) { goldenRun(t, 80, 24, "a") }

// The glossary, a page down in the help.
func TestGoldenGlossary80x24(t *testing.T) { goldenRun(t, 80, 24, "?", "pgdown") }

// Three ranks still running: the all-ranks line above the table.
func TestGoldenRanks80x24(t *testing.T) {
	evs := demoEvents(t, "warmup", 30, 3)
	goldenEvents(t, runningOnly(evs), "29 ", 80, 24)
}

// A real CPU run (torch 1.13, no CUDA): the compact timings view.
func TestGoldenCPU80x24(t *testing.T) {
	goldenEvents(t, recording(t, cpuRecording), "39 ", 80, 24)
}

// The default view at the three sizes a new user tries: no line
// cut, the banner wrapped, the footer's keys whole.
func TestGoldenWarmup120x40(t *testing.T) { goldenRun(t, 120, 40) }
func TestGoldenWarmup200x60(t *testing.T) { goldenRun(t, 200, 60) }

// The leak demo's long banner and diagnosis lines, wrapped at 80 and 120.
func TestGoldenLeak80x24(t *testing.T)  { goldenScenario(t, "leak", 80, 24) }
func TestGoldenLeak120x40(t *testing.T) { goldenScenario(t, "leak", 120, 40) }
func TestGoldenLeak200x60(t *testing.T) { goldenScenario(t, "leak", 200, 60) }

func goldenScenario(t *testing.T, scenario string, w, h int) {
	evs := demoEvents(t, scenario, 30, 1)
	evs = evs[:len(evs)-1] // the run is in progress
	goldenEvents(t, evs, "29 ", w, h)
}

// The README's screenshot: `vramscope demo` in its default view after 10 s
// (no key pressed), 120×36, with the title and the recorder the demo
// command gives its view (cli/cmd_demo.go). README.md shows this file; the
// e2e test TestTmuxReadmeScreenshotIsTheDemo compares it with the real
// demo's screen.
func TestGoldenReadme120x36(t *testing.T) {
	evs := demoEvents(t, "warmup", 25, 1) // 25 steps of ~0.4 s: 10 s
	evs = evs[:len(evs)-1]
	goldenWith(t, evs, "24 ", 120, 36, []Option{WithTitle("demo: warmup"), WithRecorder(&fakeRecorder{}, "vramscope.jsonl.gz")})
}

// The README shows TestGoldenReadme120x36's screen (trailing blanks
// trimmed): a change to the default view changes the README with it.
func TestReadmeShowsTheDefaultView(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile("testdata/TestGoldenReadme120x36.golden")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(g), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	if !strings.Contains(string(readme), "```text\n"+strings.Join(lines, "\n")+"\n```") {
		t.Error("README.md's screenshot is not testdata/TestGoldenReadme120x36.golden: paste it in")
	}
}

// A real CPU run's anatomy page: the tensors the hook measured, as the
// report gives them (not that there is nothing to break down).
func TestGoldenCPUAnatomy80x24(t *testing.T) {
	goldenEvents(t, recording(t, cpuRecording), "39 ", 80, 24, "a")
}

// Every page at the two larger sizes a new user tries (80×24 has its own
// goldens above): the diagnosis, the anatomy, the help; and the CPU run's
// compact view at all three.
func TestGoldenPages(t *testing.T) {
	for _, sz := range [][2]int{{120, 40}, {200, 60}} {
		for _, k := range []string{"d", "a", "?"} {
			name := map[string]string{"d": "diag", "a": "anatomy", "?": "help"}[k]
			t.Run(fmt.Sprintf("%s-%dx%d", name, sz[0], sz[1]), func(t *testing.T) { goldenRun(t, sz[0], sz[1], k) })
		}
	}
	for _, sz := range [][2]int{{120, 40}, {200, 60}} {
		t.Run(fmt.Sprintf("cpu-%dx%d", sz[0], sz[1]), func(t *testing.T) {
			goldenEvents(t, recording(t, cpuRecording), "39 ", sz[0], sz[1])
		})
	}
}
