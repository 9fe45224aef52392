package diagnose

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// gan names step i after D, or G every turn-th step (D's n_critic updates
// then G's).
func gan(turn int) func(int) string {
	return func(i int) string {
		if i%turn == turn-1 {
			return "G"
		}
		return "D"
	}
}

// D's and G's steps peak at levels of their own, far apart: no noise about
// one level, which hid the optimizers' state made in the first turn (read
// as "steady") and a leak in D's held memory (read as "steady" too). Read
// by turns, the first is a warmup and the second a leak from its step.
func TestModelsThatTakeTurnsAreReadByTurns(t *testing.T) {
	for _, turn := range []int{2, 6} {
		first := func(i int) int64 { return map[bool]int64{true: 0, false: 1900}[i < turn] }
		held := func(i int) int64 {
			if gan(turn)(i) == "G" {
				return 3800 + first(i)
			}
			return 5500 + first(i)
		}
		peak := func(i int) int64 { return map[string]int64{"D": 4200, "G": 3800}[gan(turn)(i)] }
		s, p := storeOf(t, namedRun(120, gan(turn), held, peak), false)
		d := Diagnose(s, p)
		if d.Turn != turn || d.Pattern != PatternWarmup || d.Steps != 120 {
			t.Fatalf("turn %d: turn %d, %s, %d steps: %s", turn, d.Turn, d.Pattern, d.Steps, d.Headline())
		}
		if d.Need.Allocated != mibs(5500+1900+4200) {
			t.Errorf("turn %d: need %d MiB, want D's steady peak", turn, d.Need.Allocated/session.MiB)
		}
		if !strings.Contains(strings.Join(d.Lines(), "\n"), fmt.Sprintf("take turns, %d steps a turn", turn)) {
			t.Errorf("turn %d: no line on the turns:\n%s", turn, strings.Join(d.Lines(), "\n"))
		}

		const from = 60
		leaky := func(i int) int64 { return held(i) + 4*max(0, int64(i-from)) }
		s, p = storeOf(t, namedRun(240, gan(turn), leaky, peak), false)
		d = Diagnose(s, p)
		if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || d.GrowthFrom < from-turn || d.GrowthFrom > from+2*turn {
			t.Fatalf("turn %d, a leak from step %d: %s %s from %d: %s", turn, from, d.Pattern, d.GrowthKind, d.GrowthFrom, d.Headline())
		}
		if r := float64(d.GrowthPerStep) / float64(4*session.MiB); r < 0.98 || r > 1.02 {
			t.Errorf("turn %d: %d B/step, want 4 MiB", turn, d.GrowthPerStep)
		}
	}
}

// Names that keep no period (a second watch whose steps come at no fixed
// place) leave the steps read one by one.
func TestModelsWithoutTurnsAreReadStepByStep(t *testing.T) {
	model := func(i int) string {
		if i == 7 || i == 30 || i == 31 {
			return "probe"
		}
		return "net"
	}
	s, p := storeOf(t, namedRun(80, model, func(int) int64 { return 1900 }, func(int) int64 { return 3000 }), false)
	if d := Diagnose(s, p); d.Turn != 0 || d.Steps != 80 {
		t.Fatalf("turn %d, %d steps", d.Turn, d.Steps)
	}
}
