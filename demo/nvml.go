package demo

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
)

// PrivateSocket makes a socket path in a new 0700 directory, for the demo,
// so it never collides with a monitor listening on the default socket.
func PrivateSocket() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "vramscope-demo-")
	if err != nil {
		return "", nil, fmt.Errorf("make demo socket directory: %w", err)
	}
	return filepath.Join(dir, "demo.sock"), func() { os.RemoveAll(dir) }, nil
}

// SimNVML drives the simulated sampler from the demo's own (virtual) clock:
// a device reading every 100 ms of demo time, the process list every second,
// as the real poller does in real time. Runs at any demo speed stay
// deterministic.
type SimNVML struct {
	mu            sync.Mutex
	sim           *probe.Simulated
	now           time.Time
	next, nextPro time.Time
	buf           []probe.Sample
	emit          func([]probe.Sample)
}

// NewSimNVML returns a simulated device whose samples go to emit.
func NewSimNVML(emit func([]probe.Sample)) *SimNVML {
	d := &SimNVML{emit: emit}
	d.sim = probe.NewSimulated(probe.WithSimClock(func() time.Time { return d.now }))
	return d
}

func (d *SimNVML) onMem(rank int, at time.Time, m ipc.Mem) {
	d.sim.OnMem(rank, at, m.Reserved)
	d.mu.Lock()
	defer d.mu.Unlock()
	if at.Before(d.next) {
		return
	}
	d.now = at
	withProc := !at.Before(d.nextPro)
	var err error
	if d.buf, err = d.sim.Sample(d.buf, withProc); err != nil {
		return
	}
	d.next = at.Add(probe.DefaultDeviceInterval)
	if withProc {
		d.nextPro = at.Add(probe.DefaultProcessInterval)
	}
	d.emit(d.buf)
}

func (d *SimNVML) onExit(rank int) { d.sim.OnExit(rank) }

// NVMLTap drives the demo's simulated NVML from the hook messages as the
// monitor receives them, so each sample is put in the feed (and the
// recording) right after the hook line it reflects. Driven from the
// demo's sender, it ran up to 11 s ahead of the lines still in the socket
// at full speed, and a replay then held the process back.
type NVMLTap struct {
	nv    *SimNVML
	mu    sync.Mutex
	conns map[uint64]tapConn
}

// tapConn is what the tap needs of a connection's hello.
type tapConn struct {
	rank int
	mono float64
	wall float64
}

// NewNVMLTap returns a tap that drives nv.
func NewNVMLTap(nv *SimNVML) *NVMLTap { return &NVMLTap{nv: nv, conns: map[uint64]tapConn{}} }

// Deliver hands d on to next, then to the simulated device.
func (t *NVMLTap) Deliver(next func(ipc.Delivery)) func(ipc.Delivery) {
	return func(d ipc.Delivery) {
		next(d)
		t.observe(d)
	}
}

func (t *NVMLTap) observe(d ipc.Delivery) {
	if d.Kind == ipc.Disconnected {
		t.mu.Lock()
		c, ok := t.conns[d.Conn]
		delete(t.conns, d.Conn)
		t.mu.Unlock()
		if ok {
			t.nv.onExit(c.rank)
		}
		return
	}
	if d.Kind != ipc.Received {
		return
	}
	m := d.Msg
	if m.Type == ipc.TypeHello && m.Clock != nil {
		c := tapConn{mono: m.Clock.Mono, wall: m.Clock.Wall}
		if m.Rank != nil {
			c.rank = *m.Rank
		}
		t.mu.Lock()
		t.conns[d.Conn] = c
		t.mu.Unlock()
		return
	}
	if m.Mem == nil {
		return
	}
	t.mu.Lock()
	c, ok := t.conns[d.Conn]
	t.mu.Unlock()
	if !ok {
		return
	}
	// The hello's clock pair maps the hook's time to wall time, to the
	// microsecond, as the store does.
	at := time.Unix(0, 0).Add(time.Duration(math.Round((c.wall+m.T-c.mono)*1e6)) * time.Microsecond)
	t.nv.onMem(c.rank, at, *m.Mem)
}
