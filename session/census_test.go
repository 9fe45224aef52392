package session

import (
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// A process keeps its first two censuses and the newest ones, MaxCensuses
// in all, however many the hook sends.
func TestCensusesAreBounded(t *testing.T) {
	s := New()
	at := time.Unix(1_763_794_800, 0)
	s.Apply(Event{At: at, Conn: 1, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, Session: "b", PID: 1,
		Clock: &ipc.Clock{Mono: 1, Wall: float64(at.Unix())}}})
	for i := 0; i < 100; i++ {
		s.Apply(Event{At: at.Add(time.Duration(i) * time.Millisecond), Conn: 1, Msg: &ipc.Message{V: 1, Type: ipc.TypeCensus,
			Seq: uint64(i + 1), T: 1 + float64(i)/1000, Step: i, Census: &ipc.Census{Reason: ipc.CensusUser, Device: "cpu"}}})
	}
	cs := s.Processes()[0].Censuses
	if len(cs) != MaxCensuses || cs[0].Step != 0 || cs[1].Step != 1 || cs[len(cs)-1].Step != 99 || cs[len(cs)-2].Step != 98 {
		t.Fatalf("kept steps %v", steps(cs))
	}
}

func steps(cs []Census) []int {
	out := make([]int, len(cs))
	for i := range cs {
		out[i] = cs[i].Step
	}
	return out
}
