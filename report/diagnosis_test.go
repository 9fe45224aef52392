package report

import (
	"bufio"
	"bytes"
	"math/rand"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Variable batch shapes (±15 % at random, no trend) are a steady run, not
// a warmup that ends at the last record high.
func TestNoisyPeaksAreSteady(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewSource(seed))
		s := newSynth(500*sMiB, false)
		for range 300 {
			s.train(noisy(rng, 1000*sMiB, 0.15), 64)
		}
		s.goodbye("exit")
		d := s.report(t).Diagnosis
		if d.Pattern != diagnose.PatternWarmup && d.Pattern != diagnose.PatternSteady || d.SteadyFrom > diagnose.WarmupMaxSteps {
			t.Errorf("seed %d: %s", seed, d.Headline)
		}
		if !strings.Contains(d.Headline, "steps vary ±") {
			t.Errorf("seed %d: the headline does not state the spread: %s", seed, d.Headline)
		}
	}
}

// A larger evaluation forward under no_grad every 50 steps is diagnosed on
// its own, not as a warmup, and leaves the training pattern alone.
func TestEvaluationIsDiagnosedOnItsOwn(t *testing.T) {
	p := everyFifty(t, func(s *synth) { s.eval(3000 * sMiB) })
	d := p.Diagnosis
	if len(d.Phases) != 1 || d.Phases[0].Name != session.EvalPhase || d.Phases[0].Every != 50 || d.Phases[0].Steps != 4 {
		t.Fatalf("phases %+v", d.Phases)
	}
	// Training peaks in backward at 1500 held (weights + optimizer) + 500
	// gradients + 1000 activations = 3000 MiB; eval at 2000 + 3000 MiB.
	for _, want := range []string{
		"eval peaks at 5000 MiB every 50 steps, 2000 MiB above training",
		"needed (steady peak): 3000 MiB allocated, 3064 MiB reserved; eval needs more: 5000 MiB allocated",
	} {
		if !strings.Contains(lines(p), want) {
			t.Fatalf("no %q in\n%s", want, lines(p))
		}
	}
}

// An evaluation whose forwards ran with gradients enabled (in eval mode,
// no torch.no_grad()) is said to, with the advice to run it under no_grad,
// even below training; one under no_grad gets neither.
func TestAnEvaluationWithGradientsEnabledIsAdvisedNoGrad(t *testing.T) {
	for _, grad := range []bool{true, false} {
		d := everyFifty(t, func(s *synth) { s.evalUser(800*sMiB, grad) }).Diagnosis
		if len(d.Phases) != 1 || d.Phases[0].Name != session.EvalPhase || d.Phases[0].Grad != grad {
			t.Fatalf("grad %v: phases %+v", grad, d.Phases)
		}
		u := d.Phases[0]
		if grad && d.EvalGradStep != 199 || !grad && d.EvalGradStep != -1 {
			t.Errorf("grad %v: eval_grad_step %d", grad, d.EvalGradStep)
		}
		// Training peaks at 3000 MiB (TestEvaluationIsDiagnosedOnItsOwn);
		// the evaluation at 2000 held + 800.
		line := "eval peaks at 2800 MiB every 50 steps, 200 MiB below training"
		if grad {
			line += ", run with gradients enabled"
		}
		if u.Line() != line {
			t.Errorf("line %q, want %q", u.Line(), line)
		}
		var advised []diagnose.Advice
		for _, a := range d.Advice {
			if strings.Contains(a.Text, "torch.no_grad()") {
				advised = append(advised, a)
			}
		}
		if !grad && len(advised) != 0 {
			t.Errorf("advice for an evaluation under no_grad: %+v", advised)
		}
		if grad && (len(advised) != 1 || !strings.Contains(advised[0].Because, "after step 199") ||
			!strings.Contains(advised[0].Because, line)) {
			t.Errorf("advice %+v", d.Advice)
		}
	}
}

// A step whose forward ran out of memory, in a loop that caught the error
// and went on (fairseq skips the batch), is a failed step: not counted as
// finished, not skipped, left out of the steady figures (its peak is its
// failed attempt's) and shown in the table though the rows around it are
// elided; its forward stays a training forward, never an evaluation.
func TestAFailedStepIsLeftOutOfTheSteadyFigures(t *testing.T) {
	for _, why := range []string{ipc.FailedOOM, ipc.FailedError} {
		s := newSynth(500*sMiB, false)
		for i := range 40 {
			if i == 20 {
				s.failed(9000*sMiB, why)
			}
			s.train(1000*sMiB, 64)
		}
		s.goodbye("exit")
		p := s.report(t)
		d := p.Diagnosis
		// Training peaks at 500 held + 1000 optimizer + 500 gradients + 1000 activations.
		if d.Need.Allocated != 3000*sMiB || d.Pattern == diagnose.PatternGrowth {
			t.Errorf("%s: need %s, %s", why, d.Need.Allocated.MiBString(), d.Headline)
		}
		if p.Totals.Steps != 40 || p.Totals.Failed != 1 {
			t.Errorf("%s: totals %d steps, %d failed", why, p.Totals.Steps, p.Totals.Failed)
		}
		if f := d.Failed; f == nil || f.Count != 1 || len(f.Steps) != 1 ||
			f.Steps[0] != (diagnose.FailedStep{Step: 20, Phase: "forward", Why: why}) {
			t.Fatalf("%s: failed %+v", why, d.Failed)
		}
		st := p.Steps[20]
		if st.Failed != why || st.Skipped || len(st.Phases) != 2 || st.Phases[1].Phase != "forward" {
			t.Errorf("%s: step 20 %+v", why, st)
		}
		var w bytes.Buffer
		bw := bufio.NewWriter(&w)
		p.writeText(bw)
		bw.Flush()
		text := w.String()
		if !strings.Contains(text, "1 step failed and the run went on: forward of step 20") ||
			!strings.Contains(text, "totals: 40 steps and 1 failed step") ||
			!regexp.MustCompile(`(?m)^ +20  zero_grad`).MatchString(text) {
			t.Errorf("%s: report\n%s", why, text)
		}
	}
}

// A last step the run ended before its update is no step it ran: a
// loop's last zero_grad (one that frees the gradients before an
// evaluation, or the except clause of a loop whose last batch failed), or
// micro-batches left over that the loop never stepped. Once the process
// has ended, it counts in neither the steps nor the steady figures, and is
// no step that skipped its update.
func TestALastStepThatNeverUpdatedIsNoStep(t *testing.T) {
	for _, last := range []string{"zero_grad", "zero_grad+eval", "leftover"} {
		s := newSynth(500*sMiB, false)
		for range 12 {
			s.train(1000*sMiB, 64)
		}
		base := s.weights + s.held + 2*s.weights
		s.phase("zero_grad", base+s.weights, base, base+s.weights, 0, false)
		switch last {
		case "zero_grad+eval":
			s.evalUser(2000*sMiB, false)
		case "leftover":
			s.phase("forward", base, base+500*sMiB, base+500*sMiB, 32, false)
			s.phase("loss", base+500*sMiB, base+500*sMiB, base+500*sMiB, 0, false)
			s.phase("backward", base+500*sMiB, base+s.weights, base+500*sMiB+s.weights, 0, false)
		}
		s.goodbye("exit")
		p := s.report(t)
		if p.Totals.Steps != 12 || p.StepsTotal != 12 || p.Totals.Failed != 0 {
			t.Errorf("%s: totals %d steps (%d), %d failed", last, p.Totals.Steps, p.StepsTotal, p.Totals.Failed)
		}
		if row := p.Steps[len(p.Steps)-1]; row.Step != 12 || row.Skipped {
			t.Errorf("%s: last row %d skipped %v", last, row.Step, row.Skipped)
		}
		d := p.Diagnosis
		if d.Pattern != diagnose.PatternSteady && d.Pattern != diagnose.PatternWarmup || d.Need.Allocated != 3000*sMiB ||
			d.Skipped != nil || d.Steps != 12 {
			t.Errorf("%s: %s, need %s, skipped %+v, %d steps", last, d.Headline, d.Need.Allocated.MiBString(), d.Skipped, d.Steps)
		}
	}
	// While the process runs, its newest step is still to come.
	s := newSynth(500*sMiB, false)
	for range 12 {
		s.train(1000*sMiB, 64)
	}
	s.phase("zero_grad", 3*s.weights, 2*s.weights, 3*s.weights, 0, false)
	if p := s.report(t); p.Totals.Steps != 13 {
		t.Errorf("running: totals %d steps", p.Totals.Steps)
	}
}

// Two watches' names (a GAN's D and G) count only the steps each ran: a
// failed step and a last step that never reached its update are in
// neither, and the names' steps add up to steps_total.
func TestModelStepsAddUpToTheTotal(t *testing.T) {
	s := newSynth(500*sMiB, false)
	for i := range 10 {
		s.model = [2]string{"D", "G"}[i%2]
		if i == 4 {
			s.failed(2000*sMiB, "oom")
			continue
		}
		s.train(1000*sMiB, 64)
	}
	s.model = "G"
	base := s.weights + s.held + 2*s.weights
	s.phase("zero_grad", base+s.weights, base, base+s.weights, 0, false)
	s.phase("forward", base, base+500*sMiB, base+500*sMiB, 32, false)
	s.goodbye("exit")
	p := s.report(t)
	if p.StepsTotal != 9 || p.Totals.Failed != 1 {
		t.Fatalf("%d steps, %d failed", p.StepsTotal, p.Totals.Failed)
	}
	want := []session.ModelSteps{{Model: "D", Steps: 4}, {Model: "G", Steps: 5}}
	if !reflect.DeepEqual(p.Models, want) {
		t.Errorf("models %+v, want %+v", p.Models, want)
	}
}

// Memory used between steps by something the hook does not see (an EMA
// copy evaluated) comes as the user phase between_steps of the step before:
// it is the need's phase part, with advice that names the steps, and
// training's own pattern and need stay as they are.
func TestBetweenStepsIsDiagnosedOnItsOwn(t *testing.T) {
	d := everyFifty(t, func(s *synth) { s.between(4000 * sMiB) }).Diagnosis
	if len(d.Phases) != 1 || d.Phases[0].Name != session.BetweenPhase || d.Phases[0].Every != 50 || d.Phases[0].Steps != 4 || d.Phases[0].Step != 49 {
		t.Fatalf("phases %+v", d.Phases)
	}
	// Training peaks in backward at 3000 MiB (TestEvaluationIsDiagnosedOnItsOwn);
	// between steps 2000 MiB held + 4000 MiB.
	n := d.Need
	if n.Allocated != 3000*sMiB || n.PhaseName != session.BetweenPhase || n.PhasePeak != 6000*sMiB {
		t.Fatalf("need %d, %q %d", n.Allocated, n.PhaseName, n.PhasePeak)
	}
	var found bool
	for _, a := range d.Advice {
		if strings.Contains(a.Text, "between steps 49 and 50") && strings.Contains(a.Text, "vramscope.phase") {
			found = true
			if want := "6000 MiB, 3000 MiB above the training need of 3000 MiB"; !strings.Contains(a.Because, want) {
				t.Errorf("because %q, want %q", a.Because, want)
			}
		}
		if strings.Contains(a.Text, "evaluation needs more") || strings.Contains(a.Text, "activation checkpointing") && d.Peak.Phase == session.BetweenPhase {
			t.Errorf("advice for what ran between steps: %+v", a)
		}
	}
	if !found {
		t.Fatalf("no advice for between_steps in %+v", d.Advice)
	}
}

// everyFifty reports 200 training steps that save 1000 MiB of activations
// each, with odd after every 50th, and checks that training's own pattern
// stays a warmup.
func everyFifty(t *testing.T, odd func(*synth)) Process {
	t.Helper()
	s := newSynth(500*sMiB, false)
	for i := range 200 {
		s.train(1000*sMiB, 64)
		if i%50 == 49 {
			odd(s)
		}
	}
	s.goodbye("exit")
	p := s.report(t)
	if d := p.Diagnosis; d.Pattern != diagnose.PatternWarmup || d.SteadyFrom > diagnose.WarmupMaxSteps {
		t.Fatalf("pattern: %s", d.Headline)
	}
	return p
}

// A leak that starts after 100 steady steps is reported from its onset, at
// its own rate, and the memory held between steps grows with it.
func TestLateLeakHasItsOnset(t *testing.T) {
	s := newSynth(500*sMiB, false)
	for i := range 200 {
		if i >= 100 {
			s.held += 50 * sMiB
		}
		s.train(1000*sMiB, 64)
	}
	s.goodbye("exit")
	d := s.report(t).Diagnosis
	if d.Pattern != diagnose.PatternGrowth || d.GrowthFrom < 98 || d.GrowthFrom > 101 || d.GrowthKind != diagnose.GrowthLeak {
		t.Fatalf("%s (from %d, kind %s)", d.Headline, d.GrowthFrom, d.GrowthKind)
	}
	if got := float64(d.GrowthPerStep) / sMiB; got < 49 || got > 51 {
		t.Fatalf("rate %.1f MiB/step, want 50", got)
	}
	if got := float64(d.HeldPerStep) / sMiB; got < 49 || got > 51 {
		t.Fatalf("held grows %.1f MiB/step, want 50", got)
	}
	if !strings.Contains(d.Headline, "from step ") || !strings.Contains(d.Headline, "possible leak") {
		t.Fatalf("headline %s", d.Headline)
	}
}

// Activations that grow with the batch (the protocol's input field) are
// named as such, with the bytes per sample, not as a leak.
func TestGrowthThatFollowsTheBatch(t *testing.T) {
	s := newSynth(500*sMiB, true)
	for i := range 15 {
		batch := int64(1024) << (i / 3)
		s.train(batch*sMiB/2, batch)
	}
	s.goodbye("exit")
	d := s.report(t).Diagnosis
	if d.Pattern != diagnose.PatternGrowth || d.GrowthKind != diagnose.GrowthInput || d.PerInput != sMiB/2 || d.InputUnit != "sample" {
		t.Fatalf("%s (kind %s, %d per %s)", d.Headline, d.GrowthKind, d.PerInput, d.InputUnit)
	}
	if !strings.Contains(d.Headline, "peak grows with batch size: 0.5 MiB per sample") || strings.Contains(d.Headline, "possible leak") {
		t.Fatalf("headline %s", d.Headline)
	}
}

// A process that disappears during backward without a goodbye ended
// abruptly there; its partial step counts in neither the pattern nor the
// totals, and the report says it is still "connected" (no goodbye).
func TestAbruptEndLeavesThePartialStepOut(t *testing.T) {
	s := newSynth(500*sMiB, false)
	for range 10 {
		s.train(1000*sMiB, 64)
	}
	s.phase("zero_grad", 2500*sMiB, 2000*sMiB, 2500*sMiB, 0, false)
	s.phase("forward", 2000*sMiB, 9000*sMiB, 9000*sMiB, 64, false)
	s.phase("loss", 9000*sMiB, 9000*sMiB, 9000*sMiB, 0, false)
	s.msg(map[string]any{"type": "phase", "name": "backward", "step": 10, "edge": "begin", "user": false, "mem": s.mem(9000*sMiB, 9000*sMiB)})
	s.disconnect()
	p := s.report(t)
	d := p.Diagnosis
	if !p.Connected || p.PartialStep != 10 || p.Totals.Steps != 10 || d.Steps != 10 || d.LastStep != 9 {
		t.Fatalf("connected %v partial %d totals %d steps %d last %d", p.Connected, p.PartialStep, p.Totals.Steps, d.Steps, d.LastStep)
	}
	if d.Pattern != diagnose.PatternWarmup || d.PeakAfter != 3000*sMiB {
		t.Fatalf("the partial step moved the pattern: %s", d.Headline)
	}
	if d.End == nil || !d.End.Abrupt || d.End.LikelyOOM || d.End.Step != 10 || d.End.Phase != "backward" {
		t.Fatalf("end %+v", d.End)
	}
	if !strings.HasPrefix(d.Headline, "ended abruptly in backward of step 10 (no goodbye") {
		t.Fatalf("headline %s", d.Headline)
	}
}

// An uncaught exception after a step's zero_grad that followed its update
// (a loop that zeroes after it, dying as it loads the next batch) leaves
// that step finished: the process ended between steps. One raised by the
// optimizer step itself (its end edge says failed) leaves its step
// unfinished: the step it died in, never one that failed while the run
// went on.
func TestAnUncaughtErrorEndsWhereItsStepStood(t *testing.T) {
	for _, died := range []string{"loading", "update"} {
		s := newSynth(500*sMiB, false)
		for range 10 {
			s.train(1000*sMiB, 64)
		}
		held := 4 * s.weights
		s.phase("forward", held, held+1000*sMiB, held+1000*sMiB, 64, false)
		s.phase("loss", held+1000*sMiB, held+1000*sMiB, held+1000*sMiB, 0, false)
		s.phase("backward", held+1000*sMiB, held, held+1000*sMiB, 0, false)
		s.msg(map[string]any{"type": "phase", "name": "step", "step": 10, "edge": "begin", "user": false, "mem": nil})
		end := map[string]any{"type": "phase", "name": "step", "step": 10, "edge": "end", "user": false, "mem": s.mem(held, held)}
		if died == "update" {
			end["failed"] = ipc.FailedError
		}
		s.msg(end)
		if died == "loading" {
			s.phase("zero_grad", held, held-s.weights, held, 0, false)
		}
		s.goodbye("error")
		p := s.report(t)
		d := p.Diagnosis
		switch died {
		case "loading":
			if p.PartialStep != -1 || p.Totals.Steps != 11 || d.End == nil || d.End.Step != -1 ||
				!strings.HasPrefix(d.Headline, "ended abruptly between steps (uncaught exception)") {
				t.Errorf("%s: partial %d, %d steps, %s", died, p.PartialStep, p.Totals.Steps, d.Headline)
			}
		case "update":
			if p.PartialStep != 10 || p.Totals.Steps != 10 || p.Totals.Failed != 0 || d.Failed != nil ||
				!strings.HasPrefix(d.Headline, "ended abruptly in optimizer step of step 10 (uncaught exception)") {
				t.Errorf("%s: partial %d, %d steps, %d failed, %s", died, p.PartialStep, p.Totals.Steps,
					p.Totals.Failed, d.Headline)
			}
		}
	}
}

// The hook's oom message (protocol addition 3) makes the end an out of
// memory, with the failed request, and a fragmented cache gets the
// expandable_segments advice.
func TestOOMMessageIsTheFlightRecordersEvidence(t *testing.T) {
	s := newSynth(500*sMiB, true)
	for range 6 {
		s.train(1000*sMiB, 64)
	}
	s.phase("zero_grad", 2500*sMiB, 2000*sMiB, 2500*sMiB, 0, false)
	s.msg(map[string]any{"type": "phase", "name": "forward", "step": 6, "edge": "begin", "user": false, "mem": s.mem(2000*sMiB, 2000*sMiB)})
	frag := map[string]any{"allocated": 60000 * sMiB, "max_allocated": 60000 * sMiB, "reserved": 78000 * sMiB, "max_reserved": 78000 * sMiB, "alloc_retries": 3, "ooms": 1}
	s.msg(map[string]any{"type": "oom", "step": 6, "phase": "forward", "mem": frag, "requested": 4096 * sMiB, "device_free": 300 * sMiB, "device_total": synthTotal})
	s.goodbye("error")
	d := s.report(t).Diagnosis
	e := d.End
	if e == nil || !e.LikelyOOM || e.Requested != 4096*sMiB || e.Fragmentation != 18000*sMiB || !e.Expandable || e.Reason != "error" {
		t.Fatalf("end %+v", e)
	}
	all := strings.Join(d.Lines, "\n")
	for _, want := range []string{
		"ended abruptly in forward of step 6 (uncaught exception): likely out of memory",
		"an allocation of 4096 MiB failed",
		"expandable_segments:True",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in\n%s", want, all)
		}
	}
}

// Everything above holds when the same session is replayed: replay
// re-stamps events on the session's timeline and feeds the same store.
func TestReplayGivesTheSameDiagnosis(t *testing.T) {
	s := newSynth(500*sMiB, false)
	for i := range 120 {
		if i >= 60 {
			s.held += 20 * sMiB
		}
		s.train(1000*sMiB, 64)
	}
	s.disconnect()
	live := Build(s.store(t))
	again := Build(replayed(t, s))
	a, b := live.Processes[0].Diagnosis, again.Processes[0].Diagnosis
	if strings.Join(a.Lines, "\n") != strings.Join(b.Lines, "\n") {
		t.Fatalf("live:\n%s\nreplay:\n%s", strings.Join(a.Lines, "\n"), strings.Join(b.Lines, "\n"))
	}
}

// Activations measured at batch 1024 are scaled to a step whose forward
// reported batch 131072, and labelled as an estimate; the report says so.
func TestActivationsScaleWithTheReportedInput(t *testing.T) {
	s := newSynth(500*sMiB, true)
	for i := range 8 {
		batch := int64(1024)
		if i >= 3 {
			batch = 131072
		}
		s.train(batch*sMiB/64, batch)
	}
	s.goodbye("exit")
	p := s.report(t)
	pk := p.Anatomy.Peak
	if pk.Step < 3 || pk.Activations != 131072*sMiB/64 || pk.ActivationsStale {
		t.Fatalf("peak step %d activations %s (%s)", pk.Step, pk.Activations.MiBString(), pk.ActivationsNote)
	}
	want := "measured at step 0, batch 1024; scaled ×128 to step"
	if !strings.HasPrefix(pk.ActivationsNote, want) || !strings.HasSuffix(pk.ActivationsNote, "(estimate)") {
		t.Fatalf("note %q, want %q…", pk.ActivationsNote, want)
	}
	if dom := p.Diagnosis.Peak.Dominant; dom != "activations" {
		t.Fatalf("dominant %s", dom)
	}
}

// An optimizer step that peaks a whole model's size above its start gets
// advice naming the fix: fused, or foreach=False.
func TestOptimizerSpikeAdviceNamesTheFix(t *testing.T) {
	s := newSynth(500*sMiB, false)
	s.spike = 1000 * sMiB
	for range 6 {
		s.train(1000*sMiB, 64)
	}
	s.goodbye("exit")
	d := s.report(t).Diagnosis
	var got *diagnose.Advice
	for i := range d.Advice {
		if strings.Contains(d.Advice[i].Text, "foreach") {
			got = &d.Advice[i]
		}
	}
	if got == nil || !strings.Contains(got.Text, "fused=True") || !strings.Contains(got.Text, "foreach=False") ||
		!strings.Contains(got.Because, "1000 MiB above its start") || !strings.Contains(got.Because, "2.0× the weights") {
		t.Fatalf("advice %+v", d.Advice)
	}
}

// An out-of-memory error the run catches and survives (a batch-size finder
// retrying smaller) is reported as such, not as the run's end.
func TestSurvivedOOMIsNotAnEnd(t *testing.T) {
	s := newSynth(500*sMiB, true)
	s.train(1000*sMiB, 64)
	s.msg(map[string]any{"type": "oom", "step": 1, "phase": "forward", "mem": nil, "requested": 8192 * sMiB, "device_free": nil, "device_total": nil})
	for range 5 {
		s.train(1000*sMiB, 32)
	}
	p := s.report(t) // still connected: the recording stopped while it ran
	d := p.Diagnosis
	if d.End == nil || d.End.Abrupt || !d.End.Survived || d.End.OOMStep != 1 || p.PartialStep != -1 {
		t.Fatalf("end %+v, partial %d", d.End, p.PartialStep)
	}
	if !strings.HasPrefix(d.Headline, "out of memory in forward of step 1 (caught) · ") {
		t.Fatalf("headline %s", d.Headline)
	}
}

// A slow leak under ±15 % noise is still found: the spread widens the band
// but the trend is far beyond it.
func TestLeakUnderNoiseIsGrowth(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	s := newSynth(500*sMiB, false)
	for range 300 {
		s.held += 5 * sMiB
		s.train(noisy(rng, 1000*sMiB, 0.15), 64)
	}
	s.goodbye("exit")
	d := s.report(t).Diagnosis
	if d.Pattern != diagnose.PatternGrowth || d.GrowthKind != diagnose.GrowthLeak {
		t.Fatalf("%s (kind %s)", d.Headline, d.GrowthKind)
	}
	if got := float64(d.GrowthPerStep) / sMiB; got < 4 || got > 6 {
		t.Fatalf("rate %.1f MiB/step, want about 5", got)
	}
}
