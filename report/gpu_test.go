package report

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// The recordings of testdata/h200 and testdata/h100/2026-11-26 (READMEs
// there) were made on a real H200 and a real H100 by the hook and monitor
// of their day; the no-hook runs' own counters are the truth. Both ran the
// same scripts (bench/gpu/checks.sh).
var gpuRuns = []struct {
	gpu, dir string
	// oomStep is the step whose forward ran out of memory; leakLine the
	// line of leak_run.py that keeps the activations in leak_children.
	oomStep, leakLine int
}{
	{"H200", "../testdata/h200", 12, 69},
	{"H100", "../testdata/h100/2026-11-26", 10, 69},
}

// seed 001: every step's held memory is the user's own memory_allocated()
// after optimizer.step() without the hook, and the running maximum of the
// step peaks is the user's max_memory_allocated() there, to the byte.
func TestGPUSeed001IsTheUsersOwnCounters(t *testing.T) {
	for _, run := range gpuRuns {
		t.Run(run.gpu, func(t *testing.T) { seed001IsTheUsersOwnCounters(t, run.dir) })
	}
}

func seed001IsTheUsersOwnCounters(t *testing.T, dir string) {
	raw, err := os.ReadFile(dir + "/s001_stat_cuda.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Step         int    `json:"step"`
		Phase        string `json:"phase"`
		Allocated    int64  `json:"allocated"`
		MaxAllocated int64  `json:"max_allocated"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	p := Build(loadRecording(t, dir+"/s001.jsonl.gz")).Processes[0]
	byStep := map[int]*Step{}
	for i := range p.Steps {
		byStep[p.Steps[i].Step] = &p.Steps[i]
	}
	var running int64
	checked := 0
	for _, r := range rows {
		if r.Phase != "step" {
			continue
		}
		st := byStep[r.Step]
		if st == nil {
			t.Fatalf("step %d missing from the report", r.Step)
		}
		if int64(st.Held) != r.Allocated {
			t.Errorf("step %d: held %d, the user's memory_allocated() after step() %d", r.Step, st.Held, r.Allocated)
		}
		if st.Peak == session.Bound {
			t.Errorf("step %d: a bound, though every read was exact", r.Step)
		}
		running = max(running, int64(st.PeakAllocated))
		if running != r.MaxAllocated {
			t.Errorf("step %d: running peak %d, the user's max_memory_allocated() %d", r.Step, running, r.MaxAllocated)
		}
		checked++
	}
	if checked != 8 {
		t.Fatalf("%d steps checked, want 8", checked)
	}
	if n := p.Diagnosis.Need; n.Allocated != 4518008832 || n.AllocatedKnown.Is == session.Bound {
		t.Fatalf("need %d (%s), want 4518008832 exactly", n.Allocated, n.AllocatedKnown.Is)
	}
}

// A loop that keeps each step's hidden activation (kept.append(h), 1024 x
// 2048 fp32 = 8 MiB a step): the monitor's suspicion brought a census and
// its follow-up, which name the list, its line and 8 MiB per step.
func TestH200LeakNamesTheHolder(t *testing.T) {
	d := Build(loadRecording(t, "../testdata/h200/leak.jsonl.gz")).Processes[0].Diagnosis
	c := d.Culprits
	if c == nil || len(c.Grew) == 0 {
		t.Fatalf("no culprit: %s", d.Headline)
	}
	g := c.Grew[0]
	if g.Name != "kept[...]" || g.Function != "main" || g.Line != 47 || g.BytesPerStep != 8<<20 {
		t.Fatalf("culprit %+v", g)
	}
}

// The same loop calls the watched model's submodules (model[0](x), ...):
// the hook sees zero_grad and the step, not the forward and backward
// between them, whose work the step's read covers. No figure of the
// optimizer's is made of that read: no spike, no "optimizer step
// allocated", no first-step line for it.
func TestH200UnseenForwardIsNoOptimizerFigure(t *testing.T) {
	p := Build(loadRecording(t, "../testdata/h200/leak.jsonl.gz")).Processes[0]
	st := p.Steps[0]
	if len(st.Phases) != 2 || st.Phases[0].Phase != "zero_grad" || st.Phases[1].Phase != "step" {
		t.Fatalf("step 0's phases: %+v", st.Phases)
	}
	d := p.Diagnosis
	for _, l := range d.Lines {
		if strings.Contains(l, "optimizer step") {
			t.Errorf("a figure of the optimizer's from a read that covers the unseen forward and backward: %q", l)
		}
	}
	for _, a := range d.Advice {
		if strings.Contains(a.Text, "fused=True") {
			t.Errorf("advice %q", a.Text)
		}
	}
}

// The same loop recorded by the hook that hooks the children of a model
// it never sees called (docs/hook.md, "Loop shapes"): from step 1 the
// steps have all five phases, and the optimizer's spike is measured from
// the backward's end: Adam's foreach temporaries, 33,653,248 B (the
// weights' 8,409,098 fp32 parameters, in 512 B blocks), under the 64 MiB
// that reports it. The user's counters and weights were identical without
// the hook (testdata/h200/README.md).
func TestGPUChildrenLoopHasItsPhases(t *testing.T) {
	for _, run := range gpuRuns {
		t.Run(run.gpu, func(t *testing.T) { childrenLoopHasItsPhases(t, run.dir, run.leakLine) })
	}
}

func childrenLoopHasItsPhases(t *testing.T, dir string, line int) {
	p := Build(loadRecording(t, dir+"/leak_children.jsonl.gz")).Processes[0]
	var names []string
	for _, ph := range p.Steps[1].Phases {
		names = append(names, ph.Phase)
	}
	if strings.Join(names, " ") != "zero_grad forward loss backward step" {
		t.Fatalf("step 1's phases: %v", names)
	}
	o := p.Diagnosis.Spike
	if o.Bytes != 33653248 || !o.Exact || o.Reported || o.Start != 706095616 {
		t.Fatalf("spike %+v", o)
	}
	if g := p.Diagnosis.Culprits.Grew[0]; g.Name != "kept[...]" || g.Line != line || g.BytesPerStep != 8<<20 {
		t.Fatalf("culprit %+v", g)
	}
	// The anatomy of the census steps carries step 2's activations, which
	// the hook scaled to the same batch (×1): the measured figure, no estimate.
	if m := p.Anatomy.Measured; m == nil || m.ActivationsSource != "scaled" ||
		p.Anatomy.Peak.ActivationsNote != "measured at step 2, batch 1024" {
		t.Fatalf("activations %+v: %q", m, p.Anatomy.Peak.ActivationsNote)
	}
}

// A real out-of-memory error in a forward (a GELU's 512 MiB on the H200,
// 256 MiB under the H100's smaller limit; oom_truth.json): the ending names
// that step and phase, and the step is left out.
func TestGPUOutOfMemoryEnding(t *testing.T) {
	for _, run := range gpuRuns {
		t.Run(run.gpu, func(t *testing.T) {
			p := Build(loadRecording(t, run.dir+"/oom.jsonl.gz")).Processes[0]
			e := p.Diagnosis.End
			if e == nil || !e.LikelyOOM || e.Step != run.oomStep || e.Phase != "forward" {
				t.Fatalf("end %+v", e)
			}
			if p.PartialStep != run.oomStep || p.StepsTotal != run.oomStep {
				t.Fatalf("partial step %d, %d steps: the dying step is not a finished one", p.PartialStep, p.StepsTotal)
			}
			// The script capped the process at 3 % of the device
			// (set_per_process_memory_fraction, oom_truth.json): torch's
			// report gives that maximum, and the ending and the need are
			// told against it, not against the device's free memory.
			raw, err := os.ReadFile(run.dir + "/oom_truth.json")
			if err != nil {
				t.Fatal(err)
			}
			var truth struct {
				Fraction float64 `json:"fraction"`
				Total    int64   `json:"total"`
			}
			if err := json.Unmarshal(raw, &truth); err != nil {
				t.Fatal(err)
			}
			allowed := session.Bytes(truth.Fraction * float64(truth.Total))
			if e.Allowed != allowed || p.Diagnosis.Need.Allowed != allowed ||
				!strings.Contains(strings.Join(e.Lines(), "\n"), "more memory than this process may reserve ("+allowed.MiBString()+" MiB") {
				t.Fatalf("allowed %v (need %v), want %v:\n%s", e.Allowed, p.Diagnosis.Need.Allowed, allowed, strings.Join(e.Lines(), "\n"))
			}
			// The anatomy now is the census at the error: zero_grad had
			// freed the gradients, and the forward had saved only part of a
			// whole forward's activations; the parts add up to allocated.
			now, at := p.Anatomy.Now, p.Diagnosis.AtOOM
			if at == nil || now.Step != run.oomStep || now.Gradients != 0 || now.Activations != at.SavedInGraphs {
				t.Fatalf("now %+v, at the error %+v", now, at)
			}
			if sum := now.Weights + now.Gradients + now.Optimizer + now.Activations + now.Other; sum != now.Allocated {
				t.Fatalf("the layers now add up to %d, allocated %d", sum, now.Allocated)
			}
		})
	}
}

// The leaking loop on the H100, all 80 steps: each step's held memory is
// the user's own memory_allocated() after optimizer.step() (the loop's
// prints without the hook, leak_counters.txt), and the running maximum of
// the step peaks is its max_memory_allocated(), to the byte, through the
// census and the capture on suspicion (steps 29-34).
func TestH100LeakLoopIsTheUsersOwnCounters(t *testing.T) {
	dir := "../testdata/h100/2026-11-26"
	rows, _ := userCounters(t, dir+"/leak_counters.txt")
	p := Build(loadRecording(t, dir+"/leak_children.jsonl.gz")).Processes[0]
	if len(p.Steps) != 80 || len(rows) != 80 {
		t.Fatalf("%d steps in the report, %d printed; want 80", len(p.Steps), len(rows))
	}
	var running int64
	for _, r := range rows {
		st := &p.Steps[r.step]
		if st.Step != r.step || int64(st.Held) != r.allocated {
			t.Errorf("step %d: held %d, the user's memory_allocated() %d", st.Step, st.Held, r.allocated)
		}
		running = max(running, int64(st.PeakAllocated))
		if running != r.maxAllocated {
			t.Errorf("step %d: running peak %d, the user's max_memory_allocated() %d", r.step, running, r.maxAllocated)
		}
	}
}

// counterRow is one line a GPU script printed after an update: the user's
// own memory_allocated() and max_memory_allocated() then.
type counterRow struct {
	step                    int
	allocated, maxAllocated int64
}

// userCounters reads such prints (bench/gpu/leak_run.py, frameworks_run.py):
// the rows, and the steps a validation followed.
func userCounters(t *testing.T, path string) ([]counterRow, map[int]bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []counterRow
	evaluated := map[int]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		var r counterRow
		var reserved int64
		if n, _ := fmt.Sscanf(line, "step %d allocated %d max_allocated %d reserved %d",
			&r.step, &r.allocated, &r.maxAllocated, &reserved); n == 4 {
			rows = append(rows, r)
		} else if n, _ := fmt.Sscanf(line, "evaluated after step %d", &r.step); n == 1 {
			evaluated[r.step] = true
		}
	}
	return rows, evaluated
}

// An out-of-memory error on an H200 recorded by the hook that sends the
// census's overlap (saved_by_module.also_other): every saved tensor of the
// failing forward was also a listed tensor (2.5 GiB), so "other tensors" is
// the rest (512 MiB, the GELU's input), and the categories with what no
// Python object names add up to allocated, to the byte; the anatomy's now
// column is the same census.
func TestH200OOMCensusCategoriesAreDisjoint(t *testing.T) {
	p := Build(loadRecording(t, "../testdata/h200/oom_census_overlap.jsonl.gz")).Processes[0]
	a := p.Diagnosis.AtOOM
	if a == nil || a.Step != 12 || !a.Complete || a.Allocator == nil || a.Allocator.Allocated == nil {
		t.Fatalf("at the error %+v", a)
	}
	if a.OtherSaved != 2684354560 || a.SavedInGraphs != 2684354560 {
		t.Fatalf("saved %d, of it listed too %d; want 2.5 GiB both", a.SavedInGraphs, a.OtherSaved)
	}
	sum := a.Weights + a.Gradients + a.Optimizer + a.SavedInGraphs + a.OtherOutside() + a.Unaccounted
	if int64(sum) != *a.Allocator.Allocated || a.Unaccounted > 100<<20 {
		t.Fatalf("categories %d (unaccounted %d), allocated %d", sum, a.Unaccounted, *a.Allocator.Allocated)
	}
	head := a.Lines()[0]
	if !strings.Contains(head, "saved in kept graphs 2.50 GiB, other tensors 512 MiB") || strings.Contains(head, "may be") {
		t.Fatalf("%q", head)
	}
	now := p.Anatomy.Now
	if now.Gradients != 0 || now.Activations != a.SavedInGraphs ||
		now.Weights+now.Optimizer+now.Activations+now.Other != now.Allocated {
		t.Fatalf("now %+v", now)
	}
}

// A real Lightning fit on an H200 (bench/gpu/frameworks_run.py --fw
// lightning: the README layout, bf16-mixed, accumulate_grad_batches=2,
// validation every 20 updates) with the callback: the running maximum of
// the step peaks is the user's own max_memory_allocated() after every
// update, to the byte. Held memory is the allocator at the update's end:
// one 512 B block more than the user's print in on_train_batch_end (a
// small tensor Lightning frees in between); on a step that a validation
// follows it is after the zero_grad Lightning runs before validating
// (docs/integrations.md).
func TestH200LightningPeaksAreTheUsersOwn(t *testing.T) {
	rows, evaluated := userCounters(t, "../testdata/h200/lightning_counters.txt")
	p := Build(loadRecording(t, "../testdata/h200/lightning.jsonl.gz")).Processes[0]
	if len(rows) != 60 || len(evaluated) != 3 {
		t.Fatalf("%d steps printed, %d validations; want 60 and 3", len(rows), len(evaluated))
	}
	var running int64
	for _, r := range rows {
		st := &p.Steps[r.step]
		running = max(running, int64(st.PeakAllocated))
		if st.Step != r.step || running != r.maxAllocated {
			t.Errorf("step %d: running peak %d, the user's max_memory_allocated() %d", r.step, running, r.maxAllocated)
		}
		if d := int64(st.Held) - r.allocated; !evaluated[r.step] && d != 0 && d != 512 {
			t.Errorf("step %d: held %d, the user's memory_allocated() %d", r.step, st.Held, r.allocated)
		}
	}
	// The process ended after the zero_grad Lightning runs before the last
	// validation, which freed the gradients: none in the now column, whose
	// parts add up to allocated.
	now := p.Anatomy.Now
	if now.Phase != "zero_grad" || now.Gradients != 0 ||
		now.Weights+now.Gradients+now.Optimizer+now.Activations+now.Other != now.Allocated {
		t.Fatalf("now %+v", now)
	}
}

// transformers' Trainer on an H200 (bench/gpu/frameworks_run.py --fw hf: a
// 4-layer GPT-2, bf16, gradient_accumulation_steps=2, evaluation every 20
// steps) with the callback, recorded by the hook that reads the Trainer's
// model.zero_grad() after the update: every step's held memory is the
// user's own memory_allocated() in on_step_end, and the running peak its
// max_memory_allocated(), to the byte, over all 40 steps. The hook before
// held the gradients in (66 MiB more on each plain step).
func TestH200HFTrainerIsTheUsersOwnCounters(t *testing.T) {
	rows, evaluated := userCounters(t, "../testdata/h200/hf_trainer_counters.txt")
	p := Build(loadRecording(t, "../testdata/h200/hf_trainer.jsonl.gz")).Processes[0]
	if len(rows) != 40 || len(evaluated) != 2 || len(p.Steps) != 40 {
		t.Fatalf("%d steps printed, %d evaluations, %d steps reported; want 40, 2, 40", len(rows), len(evaluated), len(p.Steps))
	}
	heldAndPeaksAreTheUsers(t, &p, rows)
}

// heldAndPeaksAreTheUsers checks each row's step: its held memory is the
// user's memory_allocated() and the running peak their
// max_memory_allocated(), to the byte.
func heldAndPeaksAreTheUsers(t *testing.T, p *Process, rows []counterRow) {
	t.Helper()
	var running int64
	for _, r := range rows {
		st := &p.Steps[r.step]
		running = max(running, int64(st.PeakAllocated))
		if st.Step != r.step || int64(st.Held) != r.allocated || running != r.maxAllocated {
			t.Errorf("step %d: held %d, running peak %d; the user's memory_allocated() %d, max_memory_allocated() %d",
				r.step, st.Held, running, r.allocated, r.maxAllocated)
		}
	}
}

// A k-fold loop on an H200 (bench/gpu/kfold_run.py: 3 folds of 6 steps, a
// new MLP and Adam each fold) under `vramscope run`, whose auto-attach
// follows each fold's model (testdata/h200/2026-11-28/README.md): every
// step's held memory is the user's memory_allocated() after it and the
// running peak their max_memory_allocated(), to the byte, over all 18
// steps of the three folds. The hook before kept each fold's model alive
// through the next fold's first two steps (806 MB more, 74 % more peak)
// and was seen from their third.
func TestH200KFoldUnderRunIsTheUsersOwnCounters(t *testing.T) {
	dir := "../testdata/h200/2026-11-28"
	raw, err := os.ReadFile(dir + "/kfold_nohook.txt")
	if err != nil {
		t.Fatal(err)
	}
	var rows []counterRow
	for _, line := range strings.Split(string(raw), "\n") {
		var fold, step int
		var loss float64
		var r counterRow
		if n, _ := fmt.Sscanf(line, "-- fold %d step %d loss %f allocated %d max_allocated %d",
			&fold, &step, &loss, &r.allocated, &r.maxAllocated); n == 5 {
			r.step = fold*6 + step
			rows = append(rows, r)
		}
	}
	p := Build(loadRecording(t, dir+"/kfold_run.jsonl.gz")).Processes[0]
	if len(rows) != 18 || len(p.Steps) != 18 {
		t.Fatalf("%d steps printed, %d reported; want 18", len(rows), len(p.Steps))
	}
	heldAndPeaksAreTheUsers(t, &p, rows)
	for _, st := range p.Steps {
		if want := []string{"Sequential", "Sequential_2", "Sequential_3"}[st.Step/6]; st.Model != want {
			t.Errorf("step %d: model %q, want %q", st.Step, st.Model, want)
		}
	}
}
