package metrics_test

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/session"
)

// A step that failed while the process went on (a phase raised and the
// loop caught the error) is counted, and is never the newest finished step
// whose figures the step metrics give.
func TestAFailedStepIsCountedAndNeverTheLastFinished(t *testing.T) {
	q, e := newExporter(metrics.WithMonitorHost("vm"))
	seq, tm := uint64(0), 10.0
	put := func(m *ipc.Message) {
		m.V, m.T = 1, tm
		if m.Type != ipc.TypeHello {
			seq++
			m.Seq = seq
		}
		tm += 0.01
		q.Put(session.Event{Conn: 1, Msg: m})
	}
	mem := &ipc.Mem{Allocated: 1 << 30, MaxAllocated: 2 << 30, Reserved: 3 << 30, MaxReserved: 3 << 30}
	put(&ipc.Message{Type: ipc.TypeHello, Session: "s", PID: 7, Host: "h", Clock: &ipc.Clock{Mono: 10, Wall: 1.7e9}})
	for _, ph := range []string{"forward", "loss", "backward", "step"} {
		put(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: 0, Edge: ipc.EdgeBegin})
		put(&ipc.Message{Type: ipc.TypePhase, Name: ph, Step: 0, Edge: ipc.EdgeEnd, Mem: mem})
	}
	put(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 1, Edge: ipc.EdgeBegin})
	put(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 1, Edge: ipc.EdgeEnd, Mem: mem, Failed: ipc.FailedOOM})
	put(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 2, Edge: ipc.EdgeBegin})
	fams := scrape(t, e.Handler())
	proc := map[string]string{"pid": "7"}
	if v := value(t, fams, "vramscope_failed_steps_total", proc); v != 1 {
		t.Errorf("failed steps %v, want 1", v)
	}
	if v := value(t, fams, "vramscope_last_step", proc); v != 0 {
		t.Errorf("last finished step %v, want 0 (step 1 failed, step 2 runs)", v)
	}
}
