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
			if len(s.Processes()) != DefaultMaxProcesses || s.Forgotten != c.n-DefaultMaxProcesses {
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
