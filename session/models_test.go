package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// named adds one phase of the watch model (begin and end).
func (f *feed) named(model, name string, step int) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Edge: ipc.EdgeBegin, Model: model})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Edge: ipc.EdgeEnd, Model: model})
}

// A GAN's two watches: each step is named after the
// watch whose optimizer stepped, even when another model's phases open it,
// and the process counts the steps of each name.
func TestStepsAreNamedByTheWatchThatStepped(t *testing.T) {
	f := newFeed(1, "gan")
	for i := 0; i < 3; i++ {
		d, g := 2*i, 2*i+1
		f.named("D", "zero_grad", d)
		f.named("G", "forward", d)
		f.named("G", "loss", d)
		f.named("D", "forward", d)
		f.named("D", "loss", d)
		f.named("D", "backward", d)
		f.named("D", "step", d)
		f.named("D", "forward", g) // D(fake) opens G's step (no zero_grad first)
		f.named("D", "loss", g)
		f.named("D", "backward", g)
		f.named("G", "step", g)
	}
	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	var names []string
	for _, st := range p.Steps() {
		names = append(names, st.Model)
		if !st.Stepped {
			t.Errorf("step %d has a step phase", st.Index)
		}
	}
	if got := names; len(got) != 6 || got[0] != "D" || got[1] != "G" || got[4] != "D" || got[5] != "G" {
		t.Fatalf("step names %v, want D G D G D G", got)
	}
	ms, cut := p.ModelSteps()
	if cut || len(ms) != 2 || ms[0] != (ModelSteps{"D", 3}) || ms[1] != (ModelSteps{"G", 3}) {
		t.Errorf("model steps %+v cut %v, want D 3, G 3 (G's first step was D's until its step phase)", ms, cut)
	}
	if p.NoOptimizer() {
		t.Error("a run with step phases has an optimizer")
	}
}

// Without an optimizer no step has a step phase: the
// process says so, and its steps are named by their phases. A hostile name
// is made printable at ingest.
func TestNoOptimizerAndPrintableNames(t *testing.T) {
	f := newFeed(1, "noopt")
	for i := 0; i < 2; i++ {
		f.named("net\x1b[31m", "forward", i)
		f.named("net\x1b[31m", "loss", i)
		f.named("net\x1b[31m", "backward", i)
	}
	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	if !p.NoOptimizer() {
		t.Error("no step phase: NoOptimizer should say so")
	}
	if st := p.Steps()[0]; st.Model != "net?[31m" || st.Stepped {
		t.Errorf("step 0: model %q stepped %v", st.Model, st.Stepped)
	}
	if ms, _ := p.ModelSteps(); len(ms) != 1 || ms[0].Steps != 2 {
		t.Errorf("model steps %+v", ms)
	}
}
