package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

func heldSteps(held ...int64) []session.StepPeak {
	pk := make([]session.StepPeak, len(held))
	for i, h := range held {
		pk[i] = session.StepPeak{Index: i, Held: session.Bytes(h) * session.MiB}
	}
	return pk
}

// The summary line: one figure when flat; the steps' own figure and the
// few that stray from it (a validation's zero_grad every 20 steps); the
// first, last, lowest and highest when the series moves (a leak).
func TestHeldSummaryNamesTheFewStepsThatStray(t *testing.T) {
	flat := make([]int64, 60)
	for i := range flat {
		flat[i] = 642
	}
	if l := heldOf(heldSteps(flat...)).Line(); l != "held between steps: 642 MiB (steps 0–59)" {
		t.Fatalf("%q", l)
	}
	for _, s := range []int{19, 39, 59} {
		flat[s] = 498
	}
	h := heldOf(heldSteps(flat...))
	if l := h.Line(); l != "held between steps: 642 MiB (steps 0–59), but 498 MiB on 3 of them (steps 19, 39, 59)" {
		t.Fatalf("%q", l)
	}
	if h.Typical != 642*session.MiB || h.OddMin != 498*session.MiB || h.First != 642*session.MiB || h.Last != 498*session.MiB {
		t.Fatalf("%+v", h)
	}
	leak := make([]int64, 60)
	for i := range leak {
		leak[i] = 500 + 8*int64(i)
	}
	h = heldOf(heldSteps(leak...))
	if l := h.Line(); !strings.HasPrefix(l, "held between steps: 500→972 MiB (steps 0–59; lowest 500") || h.Typical.Known() {
		t.Fatalf("%q %+v", l, h)
	}
	one := []int64{68, 164, 164, 164, 164, 164, 164, 164}
	if l := heldOf(heldSteps(one...)).Line(); l != "held between steps: 164 MiB (steps 0–7), but 68 MiB on step 0" {
		t.Fatalf("%q", l)
	}
}

// A jump in held memory among the first steps (state made at step 1, a
// buffer of the second step) then a slow leak long after: the leak is read
// from its own start, not from step 0 through the jump (which the hinge fit
// took for its start where the leak's rise was short beside the jump).
func TestALateLeakAfterAFirstStepJumpStartsWhereItStarts(t *testing.T) {
	for _, c := range []struct{ n, from, jump, rate int64 }{
		{120, 60, 1900, 4}, {240, 60, 1900, 4}, {300, 50, 1000, 1}, {240, 60, 1900, 16}, {120, 60, 0, 4},
	} {
		held := func(i int) int64 {
			return 5500 + map[bool]int64{true: 0, false: c.jump}[i < 1] + c.rate*max(0, int64(i)-c.from)
		}
		s, p := storeOf(t, namedRun(int(c.n), func(int) string { return "" }, held, func(int) int64 { return 4200 }), false)
		d := Diagnose(s, p)
		if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || d.GrowthFrom != int(c.from)+1 ||
			d.GrowthPerStep != session.Bytes(c.rate*session.MiB) {
			t.Errorf("%+v: %s %s from %d at %d B/step: %s", c, d.Pattern, d.GrowthKind, d.GrowthFrom, d.GrowthPerStep, d.Headline())
		}
	}
}
