package tui

import (
	"strings"
	"testing"
	"time"
)

// Space 70 s into a session used to show ⏱ 0:00 and the
// chart's first minute. The pause keeps the window and the clock that were
// on screen, and ←/→ scroll from there.
func TestPauseKeepsWindowAndClock(t *testing.T) {
	evs := demoEvents(t, "warmup", 400, 1)
	start := evs[0].At
	cut := 0
	for cut < len(evs) && evs[cut].At.Sub(start) < 100*time.Second {
		cut++
	}
	if cut == len(evs) {
		t.Fatalf("the demo is shorter than 100 s: %v", evs[len(evs)-1].At.Sub(start))
	}
	m := live(t, evs[:cut], 120, 40)
	clock := func(m Model) string {
		for _, f := range strings.Fields(firstLines(m.View(), 1)) {
			if strings.Contains(f, ":") && f[0] >= '0' && f[0] <= '9' {
				return f
			}
		}
		return ""
	}
	fromBefore, toBefore := m.window()
	shown := clock(m)
	if shown == "" || shown == "0:00" {
		t.Fatalf("no running clock before the pause: %q", firstLines(m.View(), 1))
	}
	m = press(t, m, "space")
	if from, to := m.window(); !from.Equal(fromBefore) || !to.Equal(toBefore) {
		t.Errorf("pause moved the chart: %v–%v, was %v–%v", from.Sub(start), to.Sub(start), fromBefore.Sub(start), toBefore.Sub(start))
	}
	if got := clock(m); got != shown {
		t.Errorf("pause changed the clock: %q, was %q", got, shown)
	}
	// More data and a clock tick while paused change neither.
	m, _ = update(t, m, batchMsg(evs[cut:cut+500]))
	m, _ = update(t, m, clockTick(time.Now()))
	m, _ = update(t, m, frameTick(time.Now()))
	if got := clock(m); got != shown {
		t.Errorf("the clock ran while paused: %q, was %q", got, shown)
	}
	m = press(t, m, "left")
	from, to := m.window()
	if want := toBefore.Add(-15 * time.Second); !to.Equal(want) || !from.Equal(want.Add(-time.Minute)) {
		t.Errorf("← while paused: window ends %v, want %v", to.Sub(start), want.Sub(start))
	}
	m = press(t, m, "right")
	if from, to := m.window(); !from.Equal(fromBefore) || !to.Equal(toBefore) {
		t.Errorf("→ while paused did not come back: %v–%v, want %v–%v", from.Sub(start), to.Sub(start), fromBefore.Sub(start), toBefore.Sub(start))
	}
	m = press(t, m, "space")
	if _, to := m.window(); !to.After(toBefore) {
		t.Errorf("resume should follow the newest data: window ends %v", to.Sub(start))
	}
}

// Unpausing after scrolling back returns the chart to the live edge; G
// (end) makes both the chart and the table follow again.
func TestResumeAndEndFollowAgain(t *testing.T) {
	evs := demoEvents(t, "warmup", 400, 1)
	m := live(t, evs[:len(evs)-1], 120, 40)
	_, live0 := m.window()
	m = press(t, m, "space", "left", "left", "space")
	if !m.anchor.IsZero() {
		t.Errorf("resume left the chart scrolled back to %v", live0.Sub(m.anchor))
	}
	m = press(t, m, "left", "left", "up", "up")
	if m.anchor.IsZero() || m.table.follow {
		t.Fatalf("the chart or the table still follows after ← and ↑")
	}
	m = press(t, m, "G")
	if !m.anchor.IsZero() || !m.table.follow {
		t.Errorf("G: chart anchored %v, table following %v; want both following", !m.anchor.IsZero(), m.table.follow)
	}
}
