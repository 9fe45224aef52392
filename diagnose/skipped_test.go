package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// withoutUpdates drops the optimizer step of the steps skip names, as a
// step whose update a GradScaler skipped (or another model's optimizer
// took) arrives: a backward, then the next zero_grad.
func withoutUpdates(msgs []ipc.Message, skip func(step int) bool) []ipc.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.Type == ipc.TypePhase && m.Name == "step" && !m.User && skip(m.Step) {
			continue
		}
		out = append(out, m)
	}
	return renumber(out)
}

// onlyZero keeps step's zero_grad alone of its training phases.
func onlyZero(msgs []ipc.Message, step int) []ipc.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.Type == ipc.TypePhase && m.Step == step && !m.User && m.Name != "zero_grad" {
			continue
		}
		out = append(out, m)
	}
	return renumber(out)
}

// A few steps that skipped their update are named, with the GradScaler as
// the likely reason; every other step skipping it is another optimizer
// updating between this model's (a GAN with one model watched), with the
// advice to watch each, and so is every k-th step through the run (a
// WGAN's critic iterations); a run without any says nothing.
func TestStepsThatSkippedTheirUpdateAreNamed(t *testing.T) {
	cases := []struct {
		name        string
		skip        func(int) bool
		count       int
		alternating bool
		period      int
		line        string
	}{
		{"none", func(int) bool { return false }, 0, false, 0, ""},
		// A watch begun inside a step whose update was under way sees its
		// zero_grad only: nothing it trained skipped an update.
		{"lone zero_grad", func(s int) bool { return s == 5 }, 0, false, 0, ""},
		{"scaler", func(s int) bool { return s == 3 || s == 4 || s == 9 }, 3, false, 0,
			"3 steps skipped the optimizer step: 3, 4, 9 (a backward, then the next zero_grad before any optimizer.step(), as a GradScaler"},
		// The last step, which never updated, is no step the run finished.
		{"gan", func(s int) bool { return s%2 == 1 }, 9, true, 2,
			"every other step skipped its optimizer step (9 of 19): another optimizer updates between this model's updates"},
		// Two critic steps for each generator step, watching the critic.
		{"wgan", func(s int) bool { return s%3 == 2 }, 6, false, 3,
			"every 3rd step skipped its optimizer step (6 of 20): another optimizer updates once for every 2 " +
				"updates of this model, through it (a GAN that trains the critic 2 times"},
		// The same stride early in the run only: a GradScaler's.
		{"stride early", func(s int) bool { return s == 2 || s == 5 || s == 8 }, 3, false, 0,
			"3 steps skipped the optimizer step: 2, 5, 8 (a backward, then the next zero_grad before any optimizer.step(), as a GradScaler"},
	}
	for _, c := range cases {
		msgs := withoutUpdates(demoMessages(t, "warmup", 20), c.skip)
		if c.name == "lone zero_grad" {
			msgs = onlyZero(msgs, 5)
		}
		s, p := storeOf(t, msgs, false)
		d := Diagnose(s, p)
		if c.count == 0 {
			if d.Skipped != nil || strings.Contains(strings.Join(d.Lines(), "\n"), "skipped") {
				t.Errorf("%s: %+v\n%s", c.name, d.Skipped, strings.Join(d.Lines(), "\n"))
			}
			continue
		}
		if d.Skipped == nil || d.Skipped.Count != c.count || d.Skipped.Alternating != c.alternating ||
			d.Skipped.Period != c.period {
			t.Fatalf("%s: %+v", c.name, d.Skipped)
		}
		if !hasLine(d.Lines(), c.line) {
			t.Errorf("%s: no %q in\n%s", c.name, c.line, strings.Join(d.Lines(), "\n"))
		}
	}
}
