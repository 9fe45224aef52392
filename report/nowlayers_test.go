package report

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// begin sends a phase's begin edge only: the phase is under way.
func (s *synth) begin(name string, alloc int64) {
	s.msg(map[string]any{"type": "phase", "name": name, "step": s.step, "edge": "begin", "user": false, "mem": s.mem(alloc, alloc)})
	s.mono += 0.01
}

// stepInOrder sends one step of a loop whose phases come in order, each
// (name, allocated at its end) read, the peak its end.
func (s *synth) stepInOrder(order []string, at map[string]int64) {
	for _, name := range order {
		s.phase(name, s.cur, at[name], max(s.cur, at[name]), 0, false)
	}
	if s.step == 0 {
		s.anatomy(400*sMiB, 64)
	}
	s.step++
}

// The anatomy's now column while a forward runs, in three loops with the
// same weights (W), gradients (W) and Adam state (2W) and a forward that
// saves 400 MiB, all caught 100 MiB into the next forward:
//   - zero first, set_to_none (the default): zero_grad freed the gradients,
//     so none are alive in the forward;
//   - Lightning's order (forward, loss, zero_grad, backward, step): the
//     forward runs with the last step's gradients alive;
//   - zero first with set_to_none=False: zero_grad frees nothing.
//
// In each the forward has saved part of its 400 MiB: activations are not
// split from the temporaries, and the note says why.
func TestNowWhileAForwardRuns(t *testing.T) {
	const w int64 = 100 * sMiB
	held := w + 2*w // weights and Adam state
	cases := []struct {
		name  string
		order []string
		at    map[string]int64 // a step's allocated at each phase's end
		start int64            // allocated when the next forward begins
		grads session.Bytes
	}{
		{"zero first", []string{"zero_grad", "forward", "loss", "backward", "step"},
			map[string]int64{"zero_grad": held, "forward": held + 400*sMiB, "loss": held + 400*sMiB,
				"backward": held + w, "step": held + w}, held, 0},
		{"Lightning", []string{"forward", "loss", "zero_grad", "backward", "step"},
			map[string]int64{"forward": held + w + 400*sMiB, "loss": held + w + 400*sMiB, "zero_grad": held + 400*sMiB,
				"backward": held + w, "step": held + w}, held + w, session.Bytes(w)},
		{"set_to_none=False", []string{"zero_grad", "forward", "loss", "backward", "step"},
			map[string]int64{"zero_grad": held + w, "forward": held + w + 400*sMiB, "loss": held + w + 400*sMiB,
				"backward": held + w, "step": held + w}, held + w, session.Bytes(w)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSynth(w, true)
			s.cur = held
			for range 3 {
				s.stepInOrder(c.order, c.at)
			}
			if c.order[0] == "zero_grad" {
				s.phase("zero_grad", s.cur, c.start, s.cur, 0, false)
			}
			s.begin("forward", c.start+100*sMiB)
			now := s.report(t).Anatomy.Now
			if now.Phase != "forward" || now.Gradients != c.grads {
				t.Fatalf("%s: gradients %v, want %v", now.Phase, now.Gradients, c.grads)
			}
			if !now.ActivationsStale || now.Activations.Known() || now.Other.Known() ||
				now.Transient != now.Allocated-now.Weights-now.Gradients-now.Optimizer ||
				!strings.HasPrefix(now.ActivationsNote, "a forward is under way, part of a whole forward's 400 MiB (measured at step 0") {
				t.Fatalf("now %+v", now)
			}
		})
	}
}

// A long run of a loop that zeroes first, whose zero_grad is read on steps
// 0-2 only (as the hook reads it): the first rows still say that it frees
// the gradients, so a forward at step 60 holds none.
func TestNowHoldsNoGradientsLongAfterTheLastReadZeroGrad(t *testing.T) {
	const w int64 = 100 * sMiB
	held := w + 2*w
	s := newSynth(w, true)
	s.cur = held
	order := []string{"zero_grad", "forward", "loss", "backward", "step"}
	at := map[string]int64{"zero_grad": held, "forward": held + 400*sMiB, "loss": held + 400*sMiB,
		"backward": held + w, "step": held + w}
	for i := range 60 {
		for _, name := range order {
			if name == "zero_grad" && i >= 3 { // not read: its end carries no mem
				s.msg(map[string]any{"type": "phase", "name": name, "step": s.step, "edge": "begin", "user": false, "mem": nil})
				s.mono += 0.01
				s.msg(map[string]any{"type": "phase", "name": name, "step": s.step, "edge": "end", "user": false, "mem": nil})
				s.cur = held
				continue
			}
			s.phase(name, s.cur, at[name], max(s.cur, at[name]), 0, false)
		}
		if s.step == 0 {
			s.anatomy(400*sMiB, 64)
		}
		s.step++
	}
	s.begin("zero_grad", held+w)
	s.msg(map[string]any{"type": "phase", "name": "zero_grad", "step": s.step, "edge": "end", "user": false, "mem": nil})
	s.begin("forward", held+100*sMiB)
	now := s.report(t).Anatomy.Now
	if now.Phase != "forward" || now.Step != 60 || now.Gradients != 0 {
		t.Fatalf("step %d %s: gradients %v, want 0", now.Step, now.Phase, now.Gradients)
	}
}
