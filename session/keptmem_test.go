package session

import (
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// The store keeps copies of the allocator figures it is given, never the
// messages' own Mem: a report reads a recording into messages and Mems
// that are reused line after line (record.Reader.Fold). Overwriting every
// Mem once applied changes nothing the store holds.
func TestStoreKeepsNoMessageMem(t *testing.T) {
	feedOf := func() *feed {
		f := newFeed(1, "s1", func(h *ipc.Message) { h.Mem = mem(1, 1, 2) })
		f.phase("zero_grad", 0, 0, 0.01, nil, mem(281, 281, 284))
		f.phase("forward", 0, 0, 0.05, mem(281, 281, 284), mem(2108, 2154, 2178))
		f.sample(mem(2200, 2200, 2300))
		f.add(&ipc.Message{Type: ipc.TypeMark, Name: "ckpt", Step: 0, Mem: mem(2100, 2200, 2300)})
		f.phase("backward", 0, 0, 0.2, nil, mem(1020, 3482, 3551))
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 0, Edge: ipc.EdgeBegin})
		f.t += 0.02
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 0, Edge: ipc.EdgeEnd, Span: ipc.SpanStep, Mem: mem(1581, 3482, 3551)})
		f.phase("forward", 1, 0, 0.05, nil, mem(2108, 2154, 2178))
		f.add(&ipc.Message{Type: ipc.TypeOOM, Step: 1, Phase: "backward", Mem: mem(3000, 3600, 3700)})
		return f
	}
	kept, want := New(), New()
	f := feedOf()
	kept.ApplyAll(f.evs)
	want.ApplyAll(feedOf().evs)
	for _, ev := range f.evs {
		if m := ev.Msg.Mem; m != nil {
			*m = ipc.Mem{Allocated: 7, MaxAllocated: 7, Reserved: 7, MaxReserved: 7, AllocRetries: 7, OOMs: 7}
		}
	}
	got, exp := kept.Processes(), want.Processes()
	if len(exp) != 1 || len(exp[0].Spans()) == 0 || len(exp[0].Marks) == 0 || exp[0].OOM == nil {
		t.Fatalf("the feed made no spans, marks or out-of-memory report: %+v", exp)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Error("the store changed with the messages' Mem after it applied them")
	}
}
