package report

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// The recordings of testdata/h200 (README there) were made on a real H200
// by today's hook and monitor; the no-hook runs' own counters are the truth.

// seed 001: every step's held memory is the user's own memory_allocated()
// after optimizer.step() without the hook, and the running maximum of the
// step peaks is the user's max_memory_allocated() there, to the byte.
func TestH200Seed001IsTheUsersOwnCounters(t *testing.T) {
	raw, err := os.ReadFile("../testdata/h200/s001_stat_cuda.json")
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
	p := Build(loadRecording(t, "../testdata/h200/s001.jsonl.gz")).Processes[0]
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
func TestH200ChildrenLoopHasItsPhases(t *testing.T) {
	p := Build(loadRecording(t, "../testdata/h200/leak_children.jsonl.gz")).Processes[0]
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
	if g := p.Diagnosis.Culprits.Grew[0]; g.Name != "kept[...]" || g.Line != 69 || g.BytesPerStep != 8<<20 {
		t.Fatalf("culprit %+v", g)
	}
}

// A real out-of-memory error in the forward of step 12 (a GELU's 512 MiB):
// the ending names that step and phase, and the step is left out.
func TestH200OutOfMemoryEnding(t *testing.T) {
	p := Build(loadRecording(t, "../testdata/h200/oom.jsonl.gz")).Processes[0]
	e := p.Diagnosis.End
	if e == nil || !e.LikelyOOM || e.Step != 12 || e.Phase != "forward" {
		t.Fatalf("end %+v", e)
	}
	if p.PartialStep != 12 || p.StepsTotal != 12 {
		t.Fatalf("partial step %d, %d steps: the dying step is not a finished one", p.PartialStep, p.StepsTotal)
	}
}
