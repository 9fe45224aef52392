package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// A fast process sends far more phases than a process keeps: the newest
// half of the bound stays whole, and each stretch before it keeps its
// highest phase, so a zoomed-out chart still shows an old spike, and a user
// phase around the whole loop is never dropped.
func TestCompactionThinsOldSpansKeepingPeaks(t *testing.T) {
	const limit = 64
	st := New(WithMaxSpans(limit))
	f := newFeed(1, "fast")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "train", Edge: ipc.EdgeBegin, User: true, Mem: mem(100, 100, 300)})
	const steps = 5000
	for s := range steps {
		alloc := int64(200)
		if s == 100 {
			alloc = 9000 // one spike, long before the newest spans
		}
		f.phase("forward", s, 0, 0.001, mem(100, 100, 300), mem(alloc, alloc, 300))
		f.phase("backward", s, 0, 0.001, mem(150, 150, 300), mem(150, 150, 300))
	}
	st.ApplyAll(f.evs)
	p := st.Process("fast")
	spans := p.Spans()
	if len(spans) > limit {
		t.Fatalf("%d spans kept, want at most %d", len(spans), limit)
	}
	if sp := spans[p.OpenSpans()[0]]; sp.Name != "train" || !sp.Open() {
		t.Fatalf("the open user phase became %+v", sp)
	}
	spike := false
	for i := range spans {
		spike = spike || spans[i].Step == 100 && spans[i].PeakAllocated == Bytes(mib(9000))
		if i > 0 && spans[i].Start.Before(spans[i-1].Start) {
			t.Fatalf("span %d starts before span %d", i, i-1)
		}
	}
	if !spike {
		t.Error("the spike's phase was thinned away")
	}
	// The newest steps keep every phase: the diagnosis reads them.
	tail := spans[len(spans)-limit/4:]
	for i, sp := range tail {
		want := steps - limit/8 + i/2
		if sp.Step != want || sp.Name != [...]string{"forward", "backward"}[i%2] {
			t.Fatalf("newest span %d is %s of step %d, want step %d", i, sp.Name, sp.Step, want)
		}
	}
	// A step's row is built as its phases end, whatever the spans keep.
	if n := p.StepCount(); n != steps {
		t.Errorf("StepCount %d, want %d", n, steps)
	}
}
