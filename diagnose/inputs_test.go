package diagnose

import (
	"math/rand"
	"strings"
	"testing"
)

// Input lengths that vary step to step, the peak following them (1 MiB
// a token over 1900 MiB held): packed batches of a sawtooth of lengths,
// and lengths drawn per step (dynamic padding).
var (
	sawtooth = func(i int) int64 { return 256 + 64*((int64(i)*7919+13)%13) }
	drawn    = func(i int) int64 { return 128 * (2 + (int64(i)*2654435761>>7)%7) }
	random   = func(i int) int64 { return 128 * int64(2+rand.New(rand.NewSource(int64(i)*7+1)).Intn(7)) }
)

// A steady run of such steps has no level change and no growth: a window's
// median wanders with the lengths drawn into it, and a sawtooth's
// step-to-step differences are so alike that the noise read from them is
// near nothing. Nor is a sawtooth's rising stretch at the run's end growth.
func TestInputsThatVaryStepToStepMakeNoLevelChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		steps  int
		tokens func(int) int64
	}{{"sawtooth", 300, sawtooth}, {"drawn", 300, drawn}, {"random", 1500, random}, {"sawtooth ending on a rise", 199, sawtooth}} {
		s, p := storeOf(t, levelRun(c.steps, func(int) int64 { return 1900 }, func(i int) int64 { return c.tokens(i) }, c.tokens), false)
		d := Diagnose(s, p)
		if len(d.Levels) != 0 || d.Pattern == PatternGrowth {
			t.Errorf("%s: %s, level changes %+v: %s", c.name, d.Pattern, d.Levels, d.Headline())
		}
	}
}

// In such runs a level change is still told where the input's own level
// moves (the batch doubled, or halved, under drawn lengths) and where held
// memory moves (layers unfrozen under a sawtooth of lengths), at its step.
func TestALevelChangeUnderInputsThatVary(t *testing.T) {
	const at = 150
	batchAt := func(i int, before, after int64) int64 { return map[bool]int64{true: before, false: after}[i < at] }
	for _, c := range []struct {
		name   string
		held   func(int) int64
		tokens func(int) int64
		batch  func(int) int64 // samples, where they change
		fall   bool
		says   string
	}{
		{"batch doubled", func(int) int64 { return 1900 },
			func(i int) int64 { return drawn(i) * 4 * batchAt(i, 1, 2) }, func(i int) int64 { return 4 * batchAt(i, 1, 2) }, false, "input"},
		{"batch halved", func(int) int64 { return 1900 },
			func(i int) int64 { return drawn(i) * 4 * batchAt(i, 2, 1) }, func(i int) int64 { return 4 * batchAt(i, 2, 1) }, true, "input"},
		{"batch cut under random lengths", func(int) int64 { return 1900 },
			func(i int) int64 { return random(i) * 2 * batchAt(i, 4, 3) }, func(i int) int64 { return 2 * batchAt(i, 4, 3) }, true, "input"},
		{"unfrozen", func(i int) int64 { return map[bool]int64{true: 1900, false: 3436}[i < at] },
			sawtooth, nil, false, "held between steps 1900→3436 MiB"},
	} {
		run := levelRun(300, c.held, func(i int) int64 { return c.tokens(i) }, c.tokens)
		if c.batch != nil {
			for _, m := range run {
				if m.Input != nil {
					b := c.batch(m.Step)
					m.Input.Batch = &b
				}
			}
		}
		s, p := storeOf(t, run, false)
		d := Diagnose(s, p)
		if len(d.Levels) != 1 || absDiff(mibs(int64(d.Levels[0].Step)), mibs(at)) > mibs(2) || d.Levels[0].Fall != c.fall {
			t.Fatalf("%s: level changes %+v, want one at step %d (%s)", c.name, d.Levels, at, d.Headline())
		}
		if d.Pattern == PatternGrowth {
			t.Errorf("%s: growth: %s", c.name, d.Headline())
		}
		if h := d.Headline(); !strings.HasPrefix(h, "level change at step ") || !strings.Contains(h, c.says) {
			t.Errorf("%s: headline %q", c.name, h)
		}
	}
}

// A curriculum of lengths that grow step by step under per-step jitter is
// input growth, not a staircase of level changes of the input.
func TestACurriculumUnderJitterIsInputGrowth(t *testing.T) {
	tokens := func(i int) int64 { return 4 * (128 + 2*int64(i) + random(i)/4) }
	s, p := storeOf(t, levelRun(300, func(int) int64 { return 1900 }, func(i int) int64 { return tokens(i) }, tokens), false)
	d := Diagnose(s, p)
	if d.Pattern != PatternGrowth || d.GrowthKind != GrowthInput || len(d.Levels) != 0 {
		t.Errorf("%s %s, level changes %+v: %s", d.Pattern, d.GrowthKind, d.Levels, d.Headline())
	}
}
