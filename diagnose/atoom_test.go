package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/fixture"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// The hook's census at an out-of-memory error inside a forward: the saved
// tensors count once, from the split by module, although both holders (the
// failing block's h and its input x) keep the part of the graph they share.
func TestAtOOMSplitsSavedActivationsByModule(t *testing.T) {
	m, err := ipc.Decode([]byte(fixture.OOMCensusLine(t)))
	if err != nil {
		t.Fatal(err)
	}
	p := &session.Process{Censuses: []session.Census{{Step: m.Step, Census: *m.Census}}}
	a := atOOM(p)
	if a == nil {
		t.Fatal("no at_oom")
	}
	var holders int64
	for _, h := range m.Census.Holders {
		holders += h.GraphSaved
	}
	if a.SavedInGraphs != 761856 || holders <= 761856 {
		t.Fatalf("saved in graphs %d (holders' sum %d), want 761856 once", a.SavedInGraphs, holders)
	}
	if len(a.SavedByModule) != 6 || *a.SavedByModule[0].Module != "blocks.0.fc2" || a.SavedByModule[0].Bytes != 262144 {
		t.Fatalf("by module %+v", a.SavedByModule)
	}
	want := "  saved activations by module: blocks.0.fc2 256 KiB; blocks.1.fc2 256 KiB; blocks.2.fc1 160 KiB; blocks.0.fc1 32 KiB; other modules 40 KiB"
	lines := a.Lines()
	found := false
	for _, l := range lines {
		found = found || l == want
	}
	if !found {
		t.Fatalf("lines:\n%s\nwant %q", strings.Join(lines, "\n"), want)
	}
}

// A census that stopped at its time budget gives lower bounds: the lines say
// so, and no "not named by any Python object" remainder is made of them.
func TestAtOOMOfAnIncompleteCensusSaysLowerBounds(t *testing.T) {
	m, err := ipc.Decode([]byte(fixture.OOMCensusLine(t)))
	if err != nil {
		t.Fatal(err)
	}
	c := *m.Census
	alloc := int64(4 << 20)
	c.Allocator = &ipc.CensusAllocator{Allocated: &alloc}
	for _, complete := range []bool{true, false} {
		c.Complete = complete
		a := atOOM(&session.Process{Censuses: []session.Census{{Step: m.Step, Census: c}}})
		head := a.Lines()[0]
		bounds := strings.Contains(head, "; the census stopped at its time budget: lower bounds")
		if bounds == complete || a.Unaccounted.Known() != complete || a.Complete != complete {
			t.Errorf("complete %v: %q, unaccounted %v", complete, head, a.Unaccounted)
		}
	}
}

// Saved tensors the collector lists too (a layer's output the next layer
// saved) count once: "other tensors" is what the graphs do not save, and
// the remainder not named by any Python object is made of disjoint parts.
// From a hook that does not say the overlap, the line says it may exist.
func TestAtOOMCountsSavedTensorsOnce(t *testing.T) {
	m, err := ipc.Decode([]byte(fixture.OOMCensusLine(t)))
	if err != nil {
		t.Fatal(err)
	}
	c := *m.Census
	sm := *c.SavedByModule
	c.SavedByModule = &sm
	g := c.Groups
	alloc := g.Parameters.Bytes + g.Gradients.Bytes + g.Optimizer.Bytes + g.Other.Bytes + sm.Total()
	c.Allocator = &ipc.CensusAllocator{Allocated: &alloc}
	c.Complete = true
	p := &session.Process{Censuses: []session.Census{{Step: m.Step, Census: c}}}
	a := atOOM(p)
	if a.OtherSaved.Known() || !strings.Contains(a.Lines()[0], "(some may be saved in those graphs too)") {
		t.Fatalf("no overlap said: %+v, %q", a.OtherSaved, a.Lines()[0])
	}
	both := min(g.Other.Bytes, sm.Total()) / 2
	sm.AlsoOther = &both
	a = atOOM(p)
	if a.OtherSaved != session.Bytes(both) || a.OtherOutside() != session.Bytes(g.Other.Bytes-both) ||
		a.Unaccounted != session.Bytes(both) {
		t.Fatalf("other %v, saved too %v, outside %v, unaccounted %v", a.Other, a.OtherSaved, a.OtherOutside(), a.Unaccounted)
	}
	want := "other tensors " + session.Bytes(g.Other.Bytes-both).Human()
	if head := a.Lines()[0]; !strings.Contains(head, want) || strings.Contains(head, "may be saved") {
		t.Fatalf("%q, want %q", head, want)
	}
}
