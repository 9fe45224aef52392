package session

import (
	"runtime"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// TestOpenPhasesAreBounded: user phases begun and never ended cost
// quadratic time and unbounded memory (0.21, 1.38 and 5.33 s for 25k, 50k
// and 100k; 243 MB after 200k begins): every snapshot visited each open
// one, and an open span blocked the compaction of all after it. Now at most
// 64 are open, the oldest but the 8 outermost are
// closed unended and counted, and an outer phase around the whole run
// still ends with its true span.
func TestOpenPhasesAreBounded(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	f := newFeed(1, "leak")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "train", Edge: ipc.EdgeBegin, User: true, Mem: mem(1, 1, 2)})
	const n = 100000
	for i := 0; i < n; i++ {
		f.t += 0.001
		f.add(&ipc.Message{Type: ipc.TypePhase, Name: "leaky", Step: i, Edge: ipc.EdgeBegin, User: true, Mem: mem(1, 1, 2)})
	}
	f.t += 0.001
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "train", Edge: ipc.EdgeEnd, User: true, Mem: mem(1, 1, 2)})
	before := heap()
	s := New()
	start := time.Now()
	s.ApplyAll(f.evs)
	took := time.Since(start)
	grew := int64(heap()) - int64(before)
	p := s.Process("leak")
	if took > 2*time.Second {
		t.Errorf("%d open phases took %v", n, took)
	}
	if grew > 32<<20 {
		t.Errorf("the store grew by %d MB", grew>>20)
	}
	if len(p.open) > 64 || p.Unended != n+1-64 {
		t.Errorf("%d open, %d unended; want at most 64 and %d", len(p.open), p.Unended, n+1-64)
	}
	var train *Span
	for i := range p.spans {
		if p.spans[i].Name == "train" {
			train = &p.spans[i]
		}
	}
	if train == nil || train.Open() || train.Unended || train.End.Sub(train.Start) < 99*time.Second {
		t.Errorf("the outer phase: %+v", train)
	}
	said := false
	for _, nt := range s.Notes {
		said = said || nt.Kind == NoteInfo && nt.Text != "" && p.Unended > 0
	}
	if !said {
		t.Error("no note says phases were closed unended")
	}
}
