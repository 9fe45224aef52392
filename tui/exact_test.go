package tui

import (
	"strings"
	"testing"
)

// s001 (hook 0.1.0): steps 2–5 repeat step 1 to the byte, so the table's
// step column shows step 1's peak marked inferred (=4309), never the lower
// bound 3393, and the held memory is a line of the diagnosis.
func TestTheStepColumnMarksAnInferredPeak(t *testing.T) {
	evs := recording(t, "../testdata/h100/s001.jsonl.gz")
	v := live(t, evs, 200, 60).View()
	if n := strings.Count(v, "=4309"); n < 3 {
		t.Errorf("%d steps show =4309, want steps 2–5 (the newest may be cut):\n%s", n, v)
	}
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, " 3393 ") && strings.Contains(l, "needed") {
			t.Errorf("3393 MiB stated as the need: %s", l)
		}
	}
	if !strings.Contains(v, "held between steps: 1650 MiB") {
		t.Errorf("no held memory line:\n%s", v)
	}
}
