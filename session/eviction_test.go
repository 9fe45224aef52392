package session

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// 100,000 hellos added 229 MB and 20,000 hellos with
// 20 KB strings 593 MB, never freed. The store keeps DefaultMaxProcesses
// and forgets the oldest disconnected ones. Both cases at full size: each
// hello on its own connection, which then closes, as the probe did.
func TestManySessionsAreBounded(t *testing.T) {
	for _, c := range []struct {
		name    string
		n       int
		argv    string
		maxHeap uint64
	}{
		{"100000 small hellos", 100000, "train.py", 16 << 20},
		{"20000 hellos with 20 KB strings", 20000, strings.Repeat("a", 4000), 48 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New()
			before := heapNow()
			for i := 0; i < c.n; i++ {
				// Each hello its own strings, as decoded from its own line.
				argv := []string{strings.Clone(c.argv), strings.Clone(c.argv), strings.Clone(c.argv), strings.Clone(c.argv), strings.Clone(c.argv)}
				conn := uint64(i + 1)
				at := time.Unix(wall0+int64(i), 0)
				s.Apply(Event{At: at, Conn: conn, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, T: 1,
					Session: fmt.Sprintf("s%d", i), PID: 1 + i, Argv: argv,
					Host: strings.Repeat("h", len(c.argv)%4096), Clock: &ipc.Clock{Mono: 1, Wall: float64(wall0 + i)}}})
				s.Apply(Event{At: at, Conn: conn, Note: &Note{Kind: NoteDisconnect, Text: "closed"}})
			}
			grew := int64(heapNow()) - int64(before)
			if len(s.Processes()) > DefaultMaxProcesses || s.Forgotten != c.n-len(s.Processes()) {
				t.Errorf("%d processes kept, %d forgotten", len(s.Processes()), s.Forgotten)
			}
			if grew > int64(c.maxHeap) {
				t.Errorf("the store grew by %d MB for %d sessions, want under %d MB", grew>>20, c.n, c.maxHeap>>20)
			}
			t.Logf("%s: heap grew %.1f MB", c.name, float64(grew)/(1<<20))
			last := s.Processes()[len(s.Processes())-1]
			if last.Key != fmt.Sprintf("s%d", c.n-1) {
				t.Errorf("the newest process is %q", last.Key)
			}
		})
	}
}

// TestGoneSessionsAreBoundedInBytes: the count bound let 1,024 gone
// processes whose hellos carry a 20 KB host, argv and torch hold 64 MB of
// the store, and 20,000 such hellos grew the live monitor by 272-286 MB.
// What the store keeps of gone processes is bounded in bytes; the newest
// stays.
func TestGoneSessionsAreBoundedInBytes(t *testing.T) {
	s := New()
	before := heapNow()
	floodOfGoneHellos(s)
	grew := int64(heapNow()) - int64(before)
	if limit := int64(32 << 20); grew > limit { // DefaultMaxGoneBytes and the processes' own overhead
		t.Errorf("the store keeps %d MB of 20,000 gone sessions, want under %d MB", grew>>20, limit>>20)
	}
	if ps := s.Processes(); len(ps) == 0 || ps[len(ps)-1].Key != "s19999" || s.Forgotten != 20_000-len(ps) {
		t.Errorf("%d kept, %d forgotten", len(ps), s.Forgotten)
	}
}

// Connected processes are never forgotten, and a process with steps
// outlives one that only said hello.
func TestForgettingPrefersIdleStrangers(t *testing.T) {
	s := New(WithMaxProcesses(3))
	worker := newFeed(1, "worker")
	worker.phase("forward", 0, 0, 0.01, mem(1, 1, 1), mem(2, 2, 2))
	s.ApplyAll(worker.evs)
	s.Apply(Event{Conn: 1, Note: &Note{Kind: NoteDisconnect}})
	live := newFeed(2, "live")
	s.ApplyAll(live.evs)
	for i := 0; i < 5; i++ {
		stranger := newFeed(uint64(10+i), fmt.Sprint("stranger", i))
		s.ApplyAll(stranger.evs)
		s.Apply(Event{Conn: uint64(10 + i), Note: &Note{Kind: NoteDisconnect}})
	}
	var keys []string
	for _, p := range s.Processes() {
		keys = append(keys, p.Key)
	}
	if got := strings.Join(keys, ","); got != "worker,live,stranger4" {
		t.Errorf("kept %s, want worker,live,stranger4", got)
	}
}

// BenchmarkGoneSessionsKept feeds the probe's flood: 20,000 hellos, each
// with a 20 KB host, argv and torch string, each on its own connection that
// then closes, and reports what the store keeps of them (MB-kept: the heap
// after a GC, less the heap before). Run with -benchtime=1x.
func BenchmarkGoneSessionsKept(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := New()
		before := heapNow()
		floodOfGoneHellos(s)
		kept := int64(heapNow()) - int64(before)
		b.ReportMetric(float64(kept)/(1<<20), "MB-kept")
		b.ReportMetric(float64(len(s.Processes())), "processes")
	}
}

// floodOfGoneHellos feeds s the probe's flood: 20,000 hellos, each with a
// 20 KB host, argv and torch string of its own, each on its own connection,
// which then closes.
func floodOfGoneHellos(s *Store) {
	big := strings.Repeat("a", 20_000)
	for j := 0; j < 20_000; j++ {
		conn := uint64(j + 1)
		at := time.Unix(wall0+int64(j), 0)
		s.Apply(Event{At: at, Conn: conn, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, T: 1,
			Session: fmt.Sprintf("s%d", j), PID: 1 + j, Host: strings.Clone(big),
			Argv: []string{strings.Clone(big)}, Torch: strings.Clone(big),
			Clock: &ipc.Clock{Mono: 1, Wall: float64(wall0 + j)}}})
		s.Apply(Event{At: at, Conn: conn, Note: &Note{Kind: NoteDisconnect, Text: "closed"}})
	}
}

// Censuses count in what the store keeps of gone processes: 300 processes
// whose 8 censuses each name 32 holders with a 1 KiB file held 100 MB
// when only their hellos and steps counted.
func TestGoneCensusesAreBoundedInBytes(t *testing.T) {
	s := New()
	before := heapNow()
	file := strings.Repeat("f", 1024)
	for j := 0; j < 300; j++ {
		conn := uint64(j + 1)
		at := time.Unix(wall0+int64(j), 0)
		s.Apply(Event{At: at, Conn: conn, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, T: 1,
			Session: fmt.Sprintf("s%d", j), PID: 1 + j, Clock: &ipc.Clock{Mono: 1, Wall: float64(wall0 + j)}}})
		for k := 0; k < MaxCensuses; k++ {
			c := &ipc.Census{Reason: ipc.CensusRequest, Device: "cpu", Complete: true}
			for h := 0; h < 32; h++ {
				c.Holders = append(c.Holders, ipc.CensusHolder{Kind: ipc.HolderLocal, Name: strings.Clone(file[:256]),
					File: strings.Clone(file), Function: "train"})
			}
			s.Apply(Event{At: at, Conn: conn, Msg: &ipc.Message{V: 1, Type: ipc.TypeCensus, Seq: uint64(k + 1), T: 2, Step: k, Census: c}})
		}
		s.Apply(Event{At: at, Conn: conn, Note: &Note{Kind: NoteDisconnect, Text: "closed"}})
	}
	grew := int64(heapNow()) - int64(before)
	if limit := int64(32 << 20); grew > limit {
		t.Errorf("the store keeps %d MB of 300 gone processes' censuses, want under %d MB", grew>>20, limit>>20)
	}
	if ps := s.Processes(); len(ps) == 0 || ps[len(ps)-1].Key != "s299" || len(ps[len(ps)-1].Censuses) != MaxCensuses {
		t.Errorf("%d kept", len(ps))
	}
}

// A gone process's curves count as the memory they hold, not as every point
// they were ever pushed: two processes that each sampled 100,000 times
// (bounded buffers of a few MB) are both kept, where counting 48 bytes a
// pushed point (14.4 MB each) forgot the first.
func TestGoneCurvesCountWhatTheyHold(t *testing.T) {
	s := New()
	for j := 0; j < 2; j++ {
		conn := uint64(j + 1)
		at := time.Unix(wall0, 0)
		s.Apply(Event{At: at, Conn: conn, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, T: 1,
			Session: fmt.Sprintf("s%d", j), PID: 1 + j, Clock: &ipc.Clock{Mono: 1, Wall: float64(wall0)}}})
		for k := 0; k < 100_000; k++ {
			at = at.Add(time.Millisecond)
			s.Apply(Event{At: at, Conn: conn, Msg: &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: uint64(k + 1),
				T: 1 + float64(k)/1000, Mem: &ipc.Mem{Allocated: int64(k), MaxAllocated: int64(k), Reserved: int64(k), MaxReserved: int64(k)}}})
		}
		s.Apply(Event{At: at, Conn: conn, Note: &Note{Kind: NoteDisconnect, Text: "closed"}})
	}
	ps := s.Processes()
	if len(ps) != 2 || s.Forgotten != 0 {
		t.Fatalf("%d kept, %d forgotten", len(ps), s.Forgotten)
	}
	if fp := ps[0].footprint(); fp > 8<<20 {
		t.Errorf("footprint %d MB for bounded curves", fp>>20)
	}
}
