package report

import (
	"bytes"
	"strings"
	"testing"
)

// accumRecording is testdata/recordings/cpu_accum4.py run with Debian's
// torch 1.13 on CPU: six optimizer steps of four micro-steps each.
const accumRecording = "../testdata/recordings/cpu_accum4.jsonl.gz"

// TestAccumulatedPhaseTimesAreSums: with gradient accumulation a phase's
// time is its micro-steps' own durations summed, so a step's phases add up
// to no more than the step; the span from the first forward's begin to the
// last one's end holds the losses and backwards between them.
func TestAccumulatedPhaseTimesAreSums(t *testing.T) {
	r := Build(loadRecording(t, accumRecording))
	if len(r.Processes) != 1 || len(r.Processes[0].Steps) != 6 {
		t.Fatalf("want 1 process of 6 steps, got %+v", r.Processes)
	}
	for _, st := range r.Processes[0].Steps {
		var sum float64
		for _, ph := range st.Phases {
			sum += ph.DurationS
			switch ph.Phase {
			case "forward", "loss", "backward":
				if ph.Count != 4 {
					t.Errorf("step %d %s: count %d, want 4", st.Step, ph.Phase, ph.Count)
				}
				if span := ph.EndS - ph.StartS; ph.DurationS >= span {
					t.Errorf("step %d %s: duration %.6f s is not below its span %.6f s", st.Step, ph.Phase, ph.DurationS, span)
				}
			}
		}
		if step := st.EndS - st.StartS; sum > step+1e-6 {
			t.Errorf("step %d: its phases take %.6f s, more than the step's %.6f s", st.Step, sum, step)
		}
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"N× ms: N micro-steps, their times summed", "     4× "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text report has no %q:\n%s", want, b.String())
		}
	}
}
