package report

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// A report of a two-rank run listed rank 1 first (it connected
// first). Reports (and the CSV, Perfetto, diff and the TUI, all through
// session.RankLess) list processes by rank, then pid; those
// without a rank after, by pid.
func TestProcessesByRankThenPID(t *testing.T) {
	s := session.New()
	rank := func(r int) *int { return &r }
	for i, h := range []ipc.Message{
		{Session: "c", PID: 300},
		{Session: "a", PID: 200, Rank: rank(1)},
		{Session: "b", PID: 100, Rank: rank(0)},
		{Session: "d", PID: 50},
	} {
		h.Type = ipc.TypeHello
		s.Apply(session.Event{Conn: uint64(i + 1), Msg: &h})
	}
	var got []int
	for _, p := range Build(s).Processes {
		got = append(got, p.PID)
	}
	if want := []int{100, 200, 50, 300}; !equal(got, want) {
		t.Errorf("report lists pids %v, want %v", got, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
