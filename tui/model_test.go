package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/vramscope/vramscope/diagnose"
)

func TestZoomLimits(t *testing.T) {
	evs := demoEvents(t, "steady", 400, 1) // about 160 s
	tests := []struct {
		name   string
		keys   []string
		zoom   int
		window time.Duration // 0: the whole session
	}{
		{"default is one minute", nil, defaultZoom, time.Minute},
		{"zoom in once", []string{"+"}, defaultZoom - 1, 30 * time.Second},
		{"zoom in stops at 5 s", []string{"+", "+", "+", "+", "+", "+"}, 0, 5 * time.Second},
		{"zoom out to 2 min", []string{"-"}, defaultZoom + 1, 2 * time.Minute},
		{"zoom out stops at the whole session", []string{"-", "-", "-", "-", "-"}, len(zoomLevels), 0},
		{"back in from the whole session", []string{"-", "-", "-", "+"}, defaultZoom + 1, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := press(t, live(t, evs, 120, 40), tt.keys...)
			if m.zoom != tt.zoom {
				t.Fatalf("zoom = %d, want %d", m.zoom, tt.zoom)
			}
			from, to := m.window()
			want := tt.window
			if want == 0 {
				want = m.store.Last().Sub(m.store.Start())
				if !from.Equal(m.store.Start()) {
					t.Errorf("whole session starts at %v, want %v", from, m.store.Start())
				}
			}
			if got := to.Sub(from); got != want {
				t.Errorf("window = %v, want %v", got, want)
			}
		})
	}
}

func TestScrollInTime(t *testing.T) {
	evs := demoEvents(t, "steady", 400, 1)
	m := live(t, evs, 120, 40)
	last := m.store.Last()
	m = press(t, m, "left")
	if want := last.Add(-15 * time.Second); !m.anchor.Equal(want) {
		t.Fatalf("after ←, right edge %v, want %v", m.anchor, want)
	}
	if !strings.Contains(m.View(), "back") {
		t.Error("a scrolled chart does not say so")
	}
	m = press(t, m, "right")
	if !m.anchor.IsZero() {
		t.Fatalf("→ back to the live edge should follow again, anchor %v", m.anchor)
	}
	for i := 0; i < 40; i++ {
		m = press(t, m, "left")
	}
	from, _ := m.window()
	if !from.Equal(m.store.Start()) {
		t.Errorf("scrolling far back stops at the session start: from %v, start %v", from, m.store.Start())
	}
}

func TestPauseFreezesTheViewNotTheData(t *testing.T) {
	evs := demoEvents(t, "warmup", 20, 1)
	half := len(evs) / 2
	m := live(t, evs[:half], 120, 40)
	m = press(t, m, "space")
	if !m.paused {
		t.Fatal("space did not pause")
	}
	frozen := m.View()
	steps := len(m.process().Steps())
	m, _ = update(t, m, batchMsg(evs[half:]))
	m, _ = update(t, m, frameTick(time.Now()))
	if got := len(m.process().Steps()); got <= steps {
		t.Fatalf("data is still applied while paused: steps %d, was %d", got, steps)
	}
	if m.View() != frozen {
		t.Error("the view changed while paused")
	}
	m = press(t, m, "space")
	if m.paused || m.View() == frozen {
		t.Error("resuming should show the new data")
	}
}

func TestTabSwitchesProcess(t *testing.T) {
	evs := demoEvents(t, "warmup", 10, 3)
	m := live(t, evs, 120, 40)
	for i, want := range []string{"rank 0 · pid 4242 (1/3)", "rank 1 · pid 4243 (2/3)", "rank 2 · pid 4244 (3/3)", "rank 0 · pid 4242 (1/3)"} {
		if got := m.process().Rank(); got != i%3 {
			t.Errorf("rank shown = %d, want %d", got, i%3)
		}
		if !strings.Contains(m.View(), want) {
			t.Errorf("header does not say %q", want)
		}
		m = press(t, m, "tab")
	}
}

func TestStepTableFollow(t *testing.T) {
	// The rows left at 80×24 follow the banner's height, which wraps at 80
	// columns: n is read from the view, the cases follow it.
	evs := demoEvents(t, "warmup", 60, 1)
	n := live(t, evs, 80, 24).table.rows()
	if n < 4 {
		t.Fatalf("80×24 shows %d step rows", n)
	}
	tests := []struct {
		name   string
		keys   []string
		follow bool
		first  int // step index of the first row
	}{
		{"follows the newest", nil, true, 60 - n},
		{"up stops following", []string{"up"}, false, 60 - n - 1},
		{"page up", []string{"pgup"}, false, 60 - 2*n},
		{"home goes to step 0", []string{"home"}, false, 0},
		{"up at the top stays", []string{"home", "up"}, false, 0},
		{"end follows again", []string{"home", "end"}, true, 60 - n},
		{"G follows again", []string{"up", "G"}, true, 60 - n},
		{"down to the bottom follows again", []string{"up", "up", "down", "down"}, true, 60 - n},
		{"page down from the top", []string{"home", "pgdown"}, false, n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := press(t, live(t, evs, 80, 24), tt.keys...)
			steps := m.process().Steps()
			if m.table.rows() != n {
				t.Fatalf("80×24 shows %d step rows, want %d", m.table.rows(), n)
			}
			if m.table.follow != tt.follow {
				t.Errorf("follow = %v, want %v", m.table.follow, tt.follow)
			}
			if got := steps[m.table.first(steps)].Index; got != tt.first {
				t.Errorf("first row is step %d, want %d", got, tt.first)
			}
			if hint := strings.Contains(m.View(), "following paused"); hint == tt.follow {
				t.Errorf("'following paused' shown = %v with follow = %v", hint, tt.follow)
			}
		})
	}
}

func TestWindowSizes(t *testing.T) {
	evs := demoEvents(t, "warmup", 20, 1)
	tests := []struct {
		w, h  int
		panel bool
	}{{80, 24, false}, {119, 30, false}, {120, 30, true}, {160, 48, true}, {250, 70, true}, {60, 16, false}}
	m := live(t, evs, 80, 24)
	for _, tt := range tests {
		m, _ = update(t, m, tea.WindowSizeMsg{Width: tt.w, Height: tt.h})
		lines := strings.Split(m.View(), "\n")
		if len(lines) != tt.h {
			t.Errorf("%d×%d: %d lines", tt.w, tt.h, len(lines))
		}
		for i, l := range lines {
			if got := lipgloss.Width(l); got != tt.w {
				t.Errorf("%d×%d: line %d is %d cells wide: %q", tt.w, tt.h, i, got, l)
				break
			}
		}
		if got := strings.Contains(m.View(), "Memory anatomy"); got != tt.panel {
			t.Errorf("%d×%d: anatomy panel shown = %v, want %v", tt.w, tt.h, got, tt.panel)
		}
	}
}

func TestHelpToggle(t *testing.T) {
	m := live(t, demoEvents(t, "warmup", 5, 1), 120, 40)
	m = press(t, m, "?")
	if m.page != pageHelp {
		t.Fatal("? did not open the help")
	}
	for _, b := range []string{"quit", "help", "pause", "earlier", "later", "zoom in", "zoom out", "process", "older step", "newer step", "page up", "page down", "first step", "follow newest"} {
		if !strings.Contains(m.View(), b) {
			t.Errorf("help does not list %q", b)
		}
	}
	if m = press(t, m, "?"); m.page != pageMain {
		t.Error("? did not close the help")
	}
	if m = press(t, m, "?", "esc"); m.page != pageMain {
		t.Error("esc did not close the help")
	}
}

func TestWaitingScreen(t *testing.T) {
	m := New(WithSocket("/run/user/1000/vramscope/vramscope.sock"), WithClock(time.Now))
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	v := m.View()
	for _, want := range []string{"Waiting for a training process on /run/user/1000/vramscope/vramscope.sock", "vramscope.watch(model, optimizer)"} {
		if !strings.Contains(v, want) {
			t.Errorf("waiting screen lacks %q:\n%s", want, v)
		}
	}
}

func TestQuit(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		m := New()
		_, cmd := update(t, m, keyMsg(k))
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s does not quit", k)
		}
		if m.ctx.Err() == nil {
			t.Errorf("%s does not cancel the source", k)
		}
	}
}

func TestBanner(t *testing.T) {
	tests := []struct{ scenario, prefix, word string }{
		{"warmup", "ℹ ", "warmup: step 1 +847 MiB over step 0: optimizer state +561, gradients kept +281, unexplained +5 MiB (3482→4329 MiB, backward of step 1); steady since step 2"},
		{"steady", "✓ ", "steady: peak 4329 MiB since step 0"},
		{"leak", "⚠ ", "growth: peak +12 MiB/step"},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			m := live(t, demoEvents(t, tt.scenario, 40, 1), 160, 48)
			banner := strings.Split(m.View(), "\n")[2]
			if !strings.HasPrefix(banner, tt.prefix+tt.word[:6]) || !strings.Contains(banner, tt.word) {
				t.Errorf("banner = %q, want %q then %q", banner, tt.prefix, tt.word)
			}
		})
	}
}

// Before MinSteps steps have finished, the banner says the run is young,
// not why a diagnosis is unknown.
func TestBannerCollecting(t *testing.T) {
	for finished := 1; finished < diagnose.MinSteps; finished++ {
		evs := demoEvents(t, "warmup", finished+1, 1)
		evs = evs[:len(evs)-1] // no goodbye: the newest step is still running
		m := live(t, evs, 80, 24)
		banner := strings.Split(m.View(), "\n")[2]
		want := fmt.Sprintf("collecting: %d of %d steps needed for a diagnosis", finished, diagnose.MinSteps)
		if !strings.Contains(banner, want) {
			t.Errorf("%d finished steps: banner = %q, want %q", finished, banner, want)
		}
	}
}

// Frames are drawn on demand: a batch arms one frame tick, a frame with
// nothing new arms none, and an idle monitor (no process) has no clock.
// The source is read again at the frame, not after each batch.
func TestTicksOnlyWhenNeeded(t *testing.T) {
	evs := demoEvents(t, "warmup", 3, 1)
	m := New(WithSource(&fakeSource{}), WithClock(fixedClock(evs)))
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	if _, cmd := update(t, m, frameTick(time.Now())); cmd != nil || m.clocking {
		t.Fatal("an idle monitor arms a tick")
	}
	m, _ = update(t, m, batchMsg(evs[:len(evs)/2]))
	if !m.ticking || !m.dirty || !m.clocking {
		t.Fatalf("a batch from a connected process: ticking %v, dirty %v, clocking %v", m.ticking, m.dirty, m.clocking)
	}
	before := m.View()
	if m.reading {
		t.Error("the source is read again before the frame: one message per event")
	}
	m, _ = update(t, m, frameTick(time.Now()))
	if m.ticking || m.dirty || !m.reading {
		t.Errorf("after the frame: ticking %v (want none armed), dirty %v, reading %v (want the next read)", m.ticking, m.dirty, m.reading)
	}
	if m.View() == before {
		t.Error("the frame tick did not draw the batch")
	}
	m, _ = update(t, m, clockTick(time.Now()))
	if !m.ticking || !m.clocking {
		t.Errorf("the clock tick of a connected process: ticking %v, clocking %v", m.ticking, m.clocking)
	}
}

// The header's elapsed time follows the data when it runs ahead of the
// wall clock (demo --speed 4), the wall clock while the run is connected.
func TestElapsedFollowsData(t *testing.T) {
	evs := demoEvents(t, "warmup", 20, 1)
	evs = evs[:len(evs)-1] // still connected
	start, last := evs[0].At, evs[len(evs)-1].At
	tests := []struct {
		clock     time.Time
		wallClock bool // else the newest data
	}{
		{start.Add(2 * time.Second), false}, // data 4× ahead of the clock
		{last.Add(30 * time.Second), true},  // a stalled run: the clock goes on
	}
	for _, tt := range tests {
		m := live(t, evs, 80, 24, WithClock(func() time.Time { return tt.clock }))
		want := m.store.Last().Sub(m.store.Start())
		if tt.wallClock {
			want = tt.clock.Sub(m.store.Start())
		}
		if got := m.elapsed(); got != want {
			t.Errorf("clock at +%v: elapsed %v, want %v", tt.clock.Sub(start), got, want)
		}
	}
}
