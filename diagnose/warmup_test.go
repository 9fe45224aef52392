package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// withTop replaces allocated figures of `from` bytes by `to` in the
// messages of one step (its phase edges and the samples between them),
// as a run whose transient top in that step was different.
func withTop(msgs []ipc.Message, step int, from, to int64) []ipc.Message {
	cur := -1
	for i := range msgs {
		m := &msgs[i]
		if m.Type == ipc.TypePhase {
			cur = m.Step
		}
		if m.Mem == nil || cur != step {
			continue
		}
		mem := *m.Mem
		if mem.Allocated == from {
			mem.Allocated = to
		}
		if mem.MaxAllocated == from {
			mem.MaxAllocated = to
		}
		m.Mem = &mem
	}
	return msgs
}

// The banner's figures add up: "+N MiB over step k" stands beside the two
// steps it compares, not beside the first step's and the steady peaks.
func TestWarmupRiseShowsTheStepsItCompares(t *testing.T) {
	msgs := withTop(demoEveryPhase(t, "warmup", 8), 1, 4329*session.MiB, 4200*session.MiB)
	for _, host := range []bool{false, true} {
		m := msgs
		if host {
			m = hostRun(msgs)
		}
		s, p := storeOf(t, m, false)
		d := Diagnose(s, p)
		h := d.Headline()
		// Step 1 tops at 4200 MiB, step 2 on at 4329: the rise into the
		// level is step 2's, 129 MiB over step 1 (the banner said
		// "(3482→4329 MiB" beside it: the first step's and the level's).
		if d.Pattern != PatternWarmup || d.Rise == nil || d.Rise.Step != 2 {
			t.Fatalf("host %v: %s", host, h)
		}
		if !strings.Contains(h, "step 2 +129 MiB over step 1") || !strings.Contains(h, "(4200→4329 MiB,") {
			t.Errorf("host %v: the rise and its figures do not add up: %s", host, h)
		}
	}
}

// A warmup of step 0 alone (a young, noisy run once said "peak grew
// 343→419 MiB over steps 0–0") grew after step 0.
func TestWarmupOfTheFirstStepAlone(t *testing.T) {
	d := Diagnosis{Pattern: PatternWarmup, FirstStep: 0, SteadyFrom: 1, WarmupStep: 0, WarmupPhase: "backward",
		PeakBefore: mibs(343), PeakAfter: mibs(419), WarmupPeak: mibs(343), PeakAfterKnown: Known{Is: session.Exact, SameAs: -1}}
	h := d.Headline()
	if strings.Contains(h, "0–0") || !strings.Contains(h, "343→419 MiB after step 0") {
		t.Errorf("headline %q", h)
	}
}

// A warmup that lasts longer than WarmupMaxSteps (autotuning over six
// steps) ends where the steps come back to the level: the steady peak
// and the need are the level's, not the warmup's. A high stretch that
// lasts past the run's first quarter is no warmup: it is the run's first
// level, and the fall from it a level change.
func TestALongWarmupEndsWhereTheStepsReturnToTheLevel(t *testing.T) {
	same := func(int) string { return "" }
	held := func(int) int64 { return 2000 }
	for _, c := range []struct {
		name        string
		steps, high int
		wobble      int64
		from, fall  int
	}{
		{"six warmup steps", 100, 6, 100, 6, -1},
		{"twenty warmup steps", 100, 20, 100, 20, -1},
		{"a high first level", 100, 40, 0, 40, 40},
	} {
		peak := func(i int) int64 {
			if i < c.high {
				return 3000 + int64(i%2)*c.wobble // two autotuning highs, taking turns
			}
			return 1000
		}
		s, p := storeOf(t, namedRun(c.steps, same, held, peak), false)
		d := Diagnose(s, p)
		fall := -1
		if len(d.Levels) == 1 && d.Levels[0].Fall {
			fall = d.Levels[0].Settled
		}
		if d.Pattern != PatternWarmup || d.SteadyFrom != c.from || d.Need.Allocated != mibs(3000) || fall != c.fall || len(d.Levels) > 1 {
			t.Errorf("%s: %s since step %d, need %s, fall settled at %d; want warmup since %d, need 3000 MiB, fall %d: %s",
				c.name, d.Pattern, d.SteadyFrom, d.Need.Allocated.MiBString(), fall, c.from, c.fall, d.Headline())
		}
	}
}

// A long warmup in a run whose level falls later (layers frozen at step
// 150): the warmup ends where the steps come down to the level that
// follows it, not the run's last one, and the fall is the only level
// change.
func TestALongWarmupBeforeAFallEndsAtTheLevelAfterIt(t *testing.T) {
	peak := func(i int) int64 {
		switch {
		case i < 8:
			return 3000
		case i < 150:
			return 1000
		}
		return 500
	}
	s, p := storeOf(t, namedRun(300, func(int) string { return "" }, func(int) int64 { return 2000 }, peak), false)
	d := Diagnose(s, p)
	if d.Pattern != PatternWarmup || d.WarmupEnd != 8 || len(d.Levels) != 1 || !d.Levels[0].Fall ||
		d.Levels[0].Step != 150 || d.Need.Allocated != mibs(2500) {
		t.Errorf("%s, warmup to step %d, level changes %+v, need %s; want a warmup to step 8, one fall at 150, need 2500 MiB: %s",
			d.Pattern, d.WarmupEnd, d.Levels, d.Need.Allocated.MiBString(), d.Headline())
	}
}

// A long warmup's autotuning peaks above where a slow leak has reached by
// the end: the need of the growing run is the highest peak so far, the
// warmup's, not the leak's newest high.
func TestAGrowthsNeedIsTheHighestPeakSoFar(t *testing.T) {
	held := func(i int) int64 {
		if i < 50 {
			return 2000
		}
		return 2000 + 4*int64(i-49)
	}
	above := func(i int) int64 {
		if i < 6 {
			return 4000 // autotuning workspaces
		}
		return 1000
	}
	s, p := storeOf(t, namedRun(300, func(int) string { return "" }, held, above), false)
	d := Diagnose(s, p)
	if d.Pattern != PatternGrowth || d.Need.Allocated != mibs(6000) || d.Need.Steady {
		t.Errorf("%s, need %s (steady %v); want growth, need the warmup's 6000 MiB: %s",
			d.Pattern, d.Need.Allocated.MiBString(), d.Need.Steady, d.Headline())
	}
}
