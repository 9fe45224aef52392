package metrics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/session"
)

// TestLabelCardinalityIsBounded: a hook that names
// a thousand user phases in one step, and hostile names with control
// bytes, could make a thousand series per process and scrape; 2,000
// processes, 2,000 label sets each. The phase label takes at most
// metrics.MaxPhaseLabels values per process, and the exporter keeps at
// most metrics.MaxProcesses processes.
func TestLabelCardinalityIsBounded(t *testing.T) {
	q, e := newExporter()
	at := time.Unix(1763794800, 0)
	seq := map[uint64]uint64{}
	put := func(conn uint64, m *ipc.Message) {
		m.V = 1
		if m.Type != ipc.TypeHello {
			seq[conn]++
			m.Seq = seq[conn]
		}
		q.Put(session.Event{At: at, Conn: conn, Msg: m})
		at = at.Add(time.Millisecond)
	}
	mem := &ipc.Mem{Allocated: 1, MaxAllocated: 1, Reserved: 2, MaxReserved: 2}
	for c := uint64(2); c < 2002; c++ {
		put(c, &ipc.Message{Type: ipc.TypeHello, Session: fmt.Sprintf("s%d", c), PID: int(c)})
	}
	put(1, &ipc.Message{Type: ipc.TypeHello, Session: "many", PID: 1})
	for step := 0; step < 2; step++ {
		for i := 0; i < 1000; i++ {
			name := fmt.Sprintf("u%d\x1b[2J", i)
			put(1, &ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Edge: ipc.EdgeBegin, User: true, Mem: mem})
			put(1, &ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Edge: ipc.EdgeEnd, User: true, Mem: mem})
		}
		put(1, &ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: step, Edge: ipc.EdgeBegin, Mem: mem})
		put(1, &ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: step, Edge: ipc.EdgeEnd, Mem: mem})
	}
	fams := scrape(t, e.Handler())
	if f := fams["vramscope_phase_peak_allocated_bytes"]; f == nil || len(f.Metric) > metrics.MaxPhaseLabels {
		n := 0
		if f != nil {
			n = len(f.Metric)
		}
		t.Errorf("%d phase_peak series for one process, want at most %d", n, metrics.MaxPhaseLabels)
	}
	if f := fams["vramscope_connected"]; f == nil || len(f.Metric) > metrics.MaxProcesses {
		t.Errorf("connected has %d series, want at most %d", len(f.Metric), metrics.MaxProcesses)
	}
}
