package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// edge adds one phase edge of step 1.
func (f *feed) edge(name, e string, dt float64, m *ipc.Mem) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: 1, Edge: e, Mem: m})
	f.t += dt
}

// TestBeginsWithoutReadsKeepExactPeaks feeds a step the way the hook sends
// it (docs/hook.md, "Cost"): end edges carry a read; forward end -> loss
// begin and loss end -> backward begin share one; zero_grad (after step
// 2), forward and step begin with mem null.
func TestBeginsWithoutReadsKeepExactPeaks(t *testing.T) {
	f := newFeed(1, "s1")
	f.phase("step", 0, 0, 0.01, mem(900, 3000, 3100), mem(1000, 3000, 3100)) // step 0's end
	f.t += 0.05
	f.edge("zero_grad", ipc.EdgeBegin, 0.001, nil)
	f.edge("zero_grad", ipc.EdgeEnd, 0.01, nil)
	f.edge("forward", ipc.EdgeBegin, 0.1, nil)
	fwd := mem(2100, 3200, 3300) // forward set a new session peak
	f.edge("forward", ipc.EdgeEnd, 0, fwd)
	f.edge("loss", ipc.EdgeBegin, 0.01, fwd)
	loss := mem(2200, 3200, 3300)
	f.edge("loss", ipc.EdgeEnd, 0, loss)
	f.edge("backward", ipc.EdgeBegin, 0.2, loss)
	f.edge("backward", ipc.EdgeEnd, 0.01, mem(1100, 3200, 3300))
	f.edge("step", ipc.EdgeBegin, 0.02, nil)
	f.edge("step", ipc.EdgeEnd, 0, mem(1000, 3200, 3300))

	s := New()
	s.ApplyAll(f.evs)
	st := s.Processes()[0].Steps()
	if len(st) != 2 {
		t.Fatalf("%d steps", len(st))
	}
	cases := []struct {
		phase    string
		peak     Bytes
		exact    bool
		allocEnd Bytes
	}{
		{"zero_grad", Unknown, true, Unknown}, // no read at all: nothing to claim
		{"forward", Bytes(mib(3200)), true, Bytes(mib(2100))},
		{"loss", Bytes(mib(2200)), false, Bytes(mib(2200))},
		{"backward", Bytes(mib(2200)), false, Bytes(mib(1100))},
		{"step", Bytes(mib(1000)), false, Bytes(mib(1000))},
	}
	for _, c := range cases {
		cell := st[1].Cell(c.phase)
		if cell == nil {
			t.Fatalf("no cell %s", c.phase)
		}
		exact := cell.Exact && cell.PeakAllocated != Unknown
		if cell.PeakAllocated != c.peak || exact != (c.exact && c.peak != Unknown) || cell.AllocatedEnd != c.allocEnd {
			t.Errorf("%s: peak %s exact=%v end %s; want %s exact=%v end %s", c.phase,
				cell.PeakAllocated.MiBString(), cell.Exact, cell.AllocatedEnd.MiBString(),
				c.peak.MiBString(), c.exact, c.allocEnd.MiBString())
		}
	}
	if st[1].PeakAllocated != Bytes(mib(3200)) {
		t.Errorf("step peak %s", st[1].PeakAllocated.MiBString())
	}
}
