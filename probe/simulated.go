package probe

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// The simulated device. Its UUID is the one the protocol fixtures' hello
// carries, so a demo hook and the simulated sampler match.
const (
	SimulatedUUID  = "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f"
	SimulatedName  = "NVIDIA A100-SXM4-80GB (simulated)"
	SimulatedTotal = 80 << 30
	// SimulatedPIDBase is the pid of rank 0; rank r is pid SimulatedPIDBase+r.
	SimulatedPIDBase = 4242
	// SimContext is the CUDA context (kernels, cuBLAS workspace, ...) each
	// rank has from its first report on.
	SimContext = 416 << 20
	// SimContextGrowth is added to a rank's context the first
	// SimContextGrowths times its reserved memory reaches a new high: new
	// shapes and ops load new kernels during the first steps.
	SimContextGrowth  = 64 << 20
	SimContextGrowths = 3
	// SimDriverReserved is what the driver keeps for itself (the v2 API's
	// "reserved"): never used by any process.
	SimDriverReserved = 512 << 20
	// simBusyUtil is the utilization while a rank's memory moved in the last
	// second; otherwise 0.
	simBusyUtil = 92
)

var errClosed = errors.New("sampler closed")

var _ Sampler = (*Simulated)(nil)

// Simulated is the demo's sampler: one A100-80GB whose processes are the
// demo's ranks. Each rank's used memory is the reserved bytes its hook last
// reported plus a CUDA context (SimContext, grown by SimContextGrowth the
// first SimContextGrowths times reserved reaches a new high), so the gap that
// vramscope shows between NVML and PyTorch is realistic. Other processes
// (WithOtherProcess) add to the device. Its output depends only on its inputs
// and its clock. OnMem and OnExit are safe to call from any goroutine.
type Simulated struct {
	now    func() time.Time
	others []Process

	mu     sync.Mutex
	ranks  []simRank // sorted by rank
	procs  []Process // buffer behind Sample.Processes
	closed bool
}

type simRank struct {
	rank     int
	reserved int64
	high     int64
	context  int64
	growths  int
	moved    time.Time // when reserved last changed
}

// NewSimulated returns a simulated sampler with no processes yet.
func NewSimulated(opts ...SimOption) *Simulated {
	s := &Simulated{now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// OnMem tells the sampler that rank's hook reported reservedBytes at at.
// The first report of a rank starts its process (pid SimulatedPIDBase+rank).
// Negative ranks are ignored; negative bytes count as 0.
func (s *Simulated) OnMem(rank int, at time.Time, reservedBytes int64) {
	if rank < 0 {
		return
	}
	if reservedBytes < 0 {
		reservedBytes = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.ranks), func(i int) bool { return s.ranks[i].rank >= rank })
	if i == len(s.ranks) || s.ranks[i].rank != rank {
		s.ranks = append(s.ranks, simRank{})
		copy(s.ranks[i+1:], s.ranks[i:])
		s.ranks[i] = simRank{rank: rank, context: SimContext, moved: at}
	}
	r := &s.ranks[i]
	if reservedBytes > r.high {
		r.high = reservedBytes
		if r.growths < SimContextGrowths {
			r.growths++
			r.context += SimContextGrowth
		}
	}
	if reservedBytes != r.reserved {
		r.moved = at
	}
	r.reserved = reservedBytes
}

// OnExit ends rank's process: it leaves the process list and frees its
// memory.
func (s *Simulated) OnExit(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.ranks {
		if s.ranks[i].rank == rank {
			s.ranks = append(s.ranks[:i], s.ranks[i+1:]...)
			return
		}
	}
}

// Devices returns the one simulated device.
func (s *Simulated) Devices() ([]Device, error) {
	return []Device{{Index: 0, UUID: SimulatedUUID, Name: SimulatedName, PCIBusID: "00000000:07:00.0", Total: SimulatedTotal}}, nil
}

// Sample reads the simulated device. It allocates nothing once dst and the
// process buffer have grown to size.
func (s *Simulated) Sample(dst []Sample, withProcesses bool) ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dst = dst[:0]
	if s.closed {
		return dst, errClosed
	}
	now := s.now()
	var used int64
	util := 0
	s.procs = s.procs[:0]
	for _, r := range s.ranks {
		u := r.reserved + r.context
		used += u
		s.procs = append(s.procs, Process{PID: SimulatedPIDBase + r.rank, Used: u})
		if d := now.Sub(r.moved); d >= 0 && d < time.Second {
			util = simBusyUtil
		}
	}
	for _, o := range s.others {
		used += o.Used
		s.procs = append(s.procs, o)
	}
	free := int64(SimulatedTotal) - SimDriverReserved - used
	if free < 0 {
		free = 0
	}
	smp := Sample{
		At: now, Device: SimulatedUUID,
		Used: used, Reserved: SimDriverReserved, Free: free, Total: SimulatedTotal,
		Util: util,
	}
	if withProcesses {
		smp.Processes = s.procs
	}
	return append(dst, smp), nil
}

// Status returns "simulated".
func (s *Simulated) Status() string { return "simulated" }

// Close ends the sampler; later Sample calls fail.
func (s *Simulated) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}
