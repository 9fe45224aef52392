package tui

import (
	"testing"

	"github.com/vramscope/vramscope/diagnose"
)

// A noisy run's diagnoses flip between verdicts from one step to the next;
// the screen keeps the first verdict until another has held for holdSteps
// finished steps in a row, and takes new figures of the same verdict at
// once.
func TestDiagnosisVerdictIsHeldUnderNoise(t *testing.T) {
	steady := func(peak int) diagnose.Diagnosis {
		return diagnose.Diagnosis{Pattern: diagnose.PatternSteady, SteadyFrom: 0, WarmupStep: -1, Steps: peak}
	}
	warmup := func(at int) diagnose.Diagnosis {
		return diagnose.Diagnosis{Pattern: diagnose.PatternWarmup, SteadyFrom: at + 1, WarmupStep: at}
	}
	unknown := diagnose.Diagnosis{Pattern: diagnose.PatternUnknown, SteadyFrom: -1, WarmupStep: -1}
	seq := []struct {
		d    diagnose.Diagnosis
		want diagnose.Pattern
		at   int // the shown warmup step
	}{
		{unknown, diagnose.PatternUnknown, 0},
		{steady(5), diagnose.PatternSteady, -1}, // the first verdict shows at once
		{warmup(1), diagnose.PatternSteady, -1}, // a noisy run's flips: held
		{warmup(2), diagnose.PatternSteady, -1},
		{warmup(1), diagnose.PatternSteady, -1},
		{unknown, diagnose.PatternSteady, -1},
		{steady(6), diagnose.PatternSteady, -1},
		{warmup(1), diagnose.PatternSteady, -1},
		{warmup(1), diagnose.PatternSteady, -1},
		{warmup(1), diagnose.PatternWarmup, 1}, // held three steps: shown
		{warmup(2), diagnose.PatternWarmup, 1},
	}
	var c diagCache
	for i, s := range seq {
		c.hold(s.d, 10+i, false)
		if c.d.Pattern != s.want || (s.want == diagnose.PatternWarmup && c.d.WarmupStep != s.at) {
			t.Fatalf("diagnosis %d (%s at %d): shown %s at %d, want %s at %d", i, s.d.Pattern, s.d.WarmupStep, c.d.Pattern, c.d.WarmupStep, s.want, s.at)
		}
	}
	if c.hold(steady(7), 40, false); c.d.Pattern != diagnose.PatternWarmup {
		t.Fatalf("a lone steady replaced the held warmup")
	}
	if c.hold(steady(7), 41, true); c.d.Pattern != diagnose.PatternSteady {
		t.Fatalf("the run ended: its last diagnosis is shown, got %s", c.d.Pattern)
	}
	// New figures of the verdict on screen show at once.
	c = diagCache{}
	c.hold(steady(1), 1, false)
	if c.hold(steady(2), 2, false); c.d.Steps != 2 {
		t.Errorf("the same verdict with new figures was not taken")
	}
}
