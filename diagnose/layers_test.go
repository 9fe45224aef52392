package diagnose

import (
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// The store-built case of the layers, moved from session's store_test.go
// with the helpers it needs (a copy of that file's feed).

// feed builds hook events for one connection on a virtual clock that starts
// at mono 100 s = wall 1,700,000,000 s.
type feed struct {
	conn uint64
	seq  uint64
	t    float64
	evs  []session.Event
}

const wall0 = 1_700_000_000

func mib(v int64) int64 { return v * session.MiB }

func mem(alloc, maxAlloc, reserved int64) *ipc.Mem {
	return &ipc.Mem{Allocated: mib(alloc), MaxAllocated: mib(maxAlloc), Reserved: mib(reserved), MaxReserved: mib(reserved)}
}

func newFeed(conn uint64, session string, opts ...func(*ipc.Message)) *feed {
	f := &feed{conn: conn, t: 100}
	h := &ipc.Message{V: 1, Type: ipc.TypeHello, T: 100, Session: session, PID: 4242,
		Clock: &ipc.Clock{Mono: 100, Wall: wall0}, Hook: &ipc.HookConfig{SampleHz: 50}}
	for _, o := range opts {
		o(h)
	}
	f.add(h)
	return f
}

func (f *feed) add(m *ipc.Message) {
	m.V = 1
	if m.Type != ipc.TypeHello {
		f.seq++
		m.Seq = f.seq
	}
	m.T = f.t
	f.evs = append(f.evs, session.Event{At: time.Unix(wall0+int64(f.t), 0), Conn: f.conn, Msg: m})
}

func (f *feed) phase(name string, step, micro int, dt float64, begin, end *ipc.Mem) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Micro: micro, Edge: ipc.EdgeBegin, Mem: begin})
	f.t += dt
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Micro: micro, Edge: ipc.EdgeEnd, Mem: end})
}

// At the peak, a process reading from before the peak must not be compared
// with the device's memory at the peak: the difference is this process's
// own growth, not other processes.
func TestLayersPairFiguresOfOneReading(t *testing.T) {
	uuid := "GPU-a"
	f := newFeed(1, "s1", func(h *ipc.Message) { h.CUDA = &ipc.CUDADevice{UUID: uuid, Total: mib(80000)} })
	f.phase("forward", 0, 0, 0.1, mem(100, 100, 200), mem(300, 300, 400))
	f.phase("backward", 0, 0, 0.1, mem(300, 300, 400), mem(100, 3000, 3200))
	f.phase("step", 0, 0, 0.1, mem(100, 3000, 3200), mem(150, 3000, 3200))
	s := session.New()
	at := time.Unix(wall0, 0)
	// One list reading at the start (alone on the device, 200 reserved +
	// 500 context), then device-only readings as the process grows.
	s.ApplyAll(f.evs[:2])
	s.Apply(session.Event{GPU: &probe.Sample{At: at, Device: uuid, Used: mib(700), Processes: []probe.Process{{PID: 4242, Used: mib(700)}}}})
	s.ApplyAll(f.evs[2:])
	s.Apply(session.Event{GPU: &probe.Sample{At: at.Add(150 * time.Millisecond), Device: uuid, Used: mib(3700)}})
	l := LayersOf(s, s.Processes()[0])
	// No list reading during the peak's phase: the process figure is stale,
	// and so is what is derived from it (a stale reading is not a
	// value). They used to show the reading in effect (500, 0).
	if !l.Peak.ProcessUsedStale || l.Peak.OtherProcesses.Known() || l.Peak.NonPyTorch.Known() {
		t.Errorf("at the peak: process stale %v, other processes %s, non-PyTorch %s; want stale, –, –",
			l.Peak.ProcessUsedStale, l.Peak.OtherProcesses.MiBString(), l.Peak.NonPyTorch.MiBString())
	}
	if l.Now.OtherProcesses != 0 {
		t.Errorf("other processes now = %s MiB, want 0", l.Now.OtherProcesses.MiBString())
	}
}
