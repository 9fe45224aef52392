package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// Held memory that rises by the same amount at a regular pace and still
// rises at the end (an evaluation every 25 steps whose predictions are
// appended to a list never cleared) is a leak in stairs: each stair is
// flat, so each rise reads as a level change, and together they read as
// "not a leak: it stays at its new level" nineteen times over. Read as a
// leak: from the first stair, at the stairs' rise over their pace.
func TestRisesThatKeepComingAtAPaceAreALeakInStairs(t *testing.T) {
	stair := func(i int) int64 { return 800 * int64(i/25) }
	held := func(i int) int64 { return 1900 + stair(i) }
	s, p := storeOf(t, levelRun(300, held, func(int) int64 { return 2000 }, func(int) int64 { return 2048 }), false)
	d := Diagnose(s, p)
	if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || d.GrowthFrom != 25 || d.Stairs == nil {
		t.Fatalf("%s %s from %d, stairs %+v: %s", d.Pattern, d.GrowthKind, d.GrowthFrom, d.Stairs, d.Headline())
	}
	if st := d.Stairs; st.Every != 25 || st.Rise != mibs(800) || st.Count != 11 || !st.Unmeasured {
		t.Errorf("stairs %+v", *st)
	}
	if want := session.Bytes(800 * session.MiB / 25); d.HeldPerStep != want || d.GrowthPerStep != want {
		t.Errorf("held %d, peak %d B/step, want %d", d.HeldPerStep, d.GrowthPerStep, want)
	}
	if text := strings.Join(d.Lines(), "\n"); !strings.Contains(text, "it rises in stairs of +800 MiB every 25 steps (11 of them, steps 25–275)") ||
		!strings.Contains(text, "unfrozen in stages") {
		t.Errorf("lines:\n%s", text)
	}
}

// Inputs of every length from step to step move the peaks, and with them
// the peaks' levels, at steps of their own; held memory does not move with
// them, and its stairs are read all the same.
func TestStairsAreReadThroughVaryingInputs(t *testing.T) {
	held := func(i int) int64 { return 1900 + 800*int64(i/25) }
	tokens := func(i int) int64 { return 256 + 64*int64((i*7919+13)%13) }
	peak := func(i int) int64 { return 2 * tokens(i) }
	s, p := storeOf(t, levelRun(300, held, peak, tokens), false)
	d := Diagnose(s, p)
	if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || d.GrowthFrom != 25 || d.Stairs == nil ||
		d.HeldPerStep != session.Bytes(800*session.MiB/25) {
		t.Fatalf("%s %s from %d at %d B/step, stairs %+v: %s", d.Pattern, d.GrowthKind, d.GrowthFrom, d.HeldPerStep, d.Stairs, d.Headline())
	}
}

// Stairs that stop, fewer than LeakStairs, or a larger input each time are
// level changes, as before.
func TestStairsThatStopOrFollowTheInputAreLevelChanges(t *testing.T) {
	for _, c := range []struct {
		name   string
		held   func(int) int64
		tokens func(int) int64
	}{
		{"three, then 200 steps flat", func(i int) int64 { return 1900 + 800*int64(min(3, i/25)) }, func(int) int64 { return 2048 }},
		{"two", func(i int) int64 { return 1900 + 800*int64(min(2, i/100)) }, func(int) int64 { return 2048 }},
		{"a longer sequence each", func(i int) int64 { return 1900 + 800*int64(i/50) }, func(i int) int64 { return 1024 * int64(1+i/50) }},
	} {
		s, p := storeOf(t, levelRun(300, c.held, func(int) int64 { return 2000 }, c.tokens), false)
		if d := Diagnose(s, p); d.Pattern == PatternGrowth || d.Stairs != nil || len(d.Levels) < 2 {
			t.Errorf("%s: %s, stairs %+v, %d level changes: %s", c.name, d.Pattern, d.Stairs, len(d.Levels), d.Headline())
		}
	}
}
