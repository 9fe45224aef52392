package tui

import (
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/session"
)

// replayModel builds a replay of evs at 120×40, streamed from memory.
func replayModel(t *testing.T, evs []session.Event) Model {
	t.Helper()
	var opens int
	return streamModel(t, evs, &opens)
}

// frames sends n frame ticks dt apart starting at t0, delivering what the
// replay's reader sends meanwhile, and returns the time of the last.
func frames(t *testing.T, m Model, t0 time.Time, n int, dt time.Duration) (Model, time.Time) {
	t.Helper()
	for i := 0; i < n; i++ {
		t0 = t0.Add(dt)
		m, _ = update(t, m, frameTick(t0))
		m = pump(t, m)
	}
	return m, t0
}

func TestReplayClock(t *testing.T) {
	evs := demoEvents(t, "warmup", 60, 1)
	start := evs[0].At
	m := replayModel(t, evs)
	wall := time.Unix(0, 0)
	m, wall = frames(t, m, wall, 11, 100*time.Millisecond) // the first tick only sets the pace
	if got := m.replay.now.Sub(start); got != time.Second {
		t.Fatalf("1×: virtual clock at %v after 1 s, want 1s", got)
	}
	m = press(t, m, "s")
	if m.replay.speed != 1 || !strings.Contains(m.View(), "speed 4×") {
		t.Fatalf("s: speed %s, want 4×", speedNames[m.replay.speed])
	}
	m, wall = frames(t, m, wall, 10, 100*time.Millisecond)
	if got := m.replay.now.Sub(start); got != 5*time.Second {
		t.Fatalf("4×: virtual clock at %v, want 5s", got)
	}
	m = press(t, m, "space")
	m, wall = frames(t, m, wall, 10, 100*time.Millisecond)
	if got := m.replay.now.Sub(start); got != 5*time.Second || !strings.Contains(m.View(), "PAUSED") {
		t.Fatalf("paused: virtual clock moved to %v", got)
	}
	steps := len(m.process().Steps())
	m = pump(t, press(t, m, "left")) // seek back a quarter of the 1 min window
	if got := m.replay.now.Sub(start); got != 0 {
		t.Fatalf("seek back from 5 s by 15 s: at %v, want the start", got)
	}
	if got := len(m.process().Steps()); got >= steps {
		t.Errorf("seeking back should rebuild the store: %d steps, had %d", got, steps)
	}
	m = pump(t, press(t, m, "right", "right"))
	if got, end := m.replay.now.Sub(start), m.replay.length(); got != end {
		t.Fatalf("seek forward twice (30 s): at %v, want the end %v", got, end)
	}
	if !m.replay.done() || len(m.process().Steps()) != 60 {
		t.Errorf("at the end every event is applied: done %v, %d steps", m.replay.done(), len(m.process().Steps()))
	}
	m = press(t, m, "s", "s", "s")
	if speedNames[m.replay.speed] != "1×" {
		t.Errorf("s cycles back to 1×, got %s", speedNames[m.replay.speed])
	}
	_ = wall
}

// TestReplayMatchesLive feeds the same events live, through a Source, and
// as a replay played to the end at max speed: the step tables must match.
func TestReplayMatchesLive(t *testing.T) {
	evs := demoEvents(t, "warmup", 300, 2)
	lm := live(t, evs, 160, 48)
	rm := playMax(t, replayModel(t, evs))
	rm, _ = update(t, rm, tea.WindowSizeMsg{Width: 160, Height: 48})
	for r := range lm.store.Processes() {
		lv, rv := lm.table.view(lm.visibleSteps(lm.process()), rowMarks{}), rm.table.view(rm.visibleSteps(rm.process()), rowMarks{})
		if lv != rv {
			t.Fatalf("rank %d: live table\n%s\nreplay table\n%s", r, lv, rv)
		}
		if got, want := len(rm.process().Steps()), 300; got != want {
			t.Fatalf("rank %d: %d steps, want %d", r, got, want)
		}
		lm, rm = press(t, lm, "tab"), press(t, rm, "tab")
	}
	if strings.Split(lm.View(), "\n")[2] != strings.Split(rm.View(), "\n")[2] {
		t.Error("the banners differ")
	}
}

type fakeRecorder struct {
	calls []string
	path  string
	fail  error
}

func (f *fakeRecorder) Start(path string) error {
	f.calls = append(f.calls, "start "+path)
	if f.fail != nil {
		return f.fail
	}
	f.path = path
	return nil
}

func (f *fakeRecorder) Stop() error {
	f.calls = append(f.calls, "stop")
	f.path = ""
	return nil
}

func (f *fakeRecorder) Path() string { return f.path }

func TestRecordingToggle(t *testing.T) {
	rec := &fakeRecorder{}
	evs := demoEvents(t, "warmup", 5, 1)
	m := live(t, evs, 120, 40, WithRecorder(rec, "run.vrec"))
	m, cmd := update(t, m, keyMsg("r"))
	if len(rec.calls) != 0 {
		t.Fatal("Update called the recorder itself")
	}
	if cmd == nil {
		t.Fatal("r gave no command")
	}
	m, _ = update(t, m, cmd())
	if strings.Join(rec.calls, ",") != "start run.vrec" || m.recPath != "run.vrec" {
		t.Fatalf("calls %v, recPath %q", rec.calls, m.recPath)
	}
	if !strings.Contains(m.View(), "● REC run.vrec") {
		t.Error("header does not show the recording")
	}
	m, cmd = update(t, m, keyMsg("r"))
	m, _ = update(t, m, cmd())
	if strings.Join(rec.calls, ",") != "start run.vrec,stop" || m.recPath != "" || strings.Contains(m.View(), "REC") {
		t.Fatalf("stop: calls %v, recPath %q", rec.calls, m.recPath)
	}
	rec.fail = errors.New("disk full")
	m, cmd = update(t, m, keyMsg("r"))
	m, _ = update(t, m, cmd())
	if m.recPath != "" || !strings.Contains(m.View(), "record: disk full") {
		t.Errorf("a failed start should be shown: recPath %q", m.recPath)
	}
}

func TestRecordKeyOffInReplay(t *testing.T) {
	rec := &fakeRecorder{}
	var opens int
	m := streamModel(t, demoEvents(t, "warmup", 3, 1), &opens, WithRecorder(rec, "x.vrec"))
	if _, cmd := update(t, m, keyMsg("r")); cmd != nil || len(rec.calls) != 0 {
		t.Errorf("r records in replay mode: calls %v", rec.calls)
	}
}
