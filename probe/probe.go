// Package probe defines how vramscope samples GPU memory from the driver's
// point of view: the Sampler interface, the Sample it produces, a null
// sampler for machines without NVML, and a simulated one for the demo.
// It has no cgo; the only importer of go-nvml is the nvmlprobe sub-package.
package probe

import "time"

// Device is one GPU as the driver lists it.
type Device struct {
	Index    int    // NVML index (not CUDA's: the two orders differ)
	UUID     string // "GPU-..." ; the key used to match a CUDA device
	Name     string
	PCIBusID string
	Total    int64 // bytes
	// MIG is true when MIG mode is on: the driver then reports no
	// per-process memory for the whole GPU (see ProcessesVisible).
	MIG bool
}

// Process is one compute process's memory on a device.
type Process struct {
	PID  int   // host pid as the driver reports it
	Used int64 // bytes
}

// Sample is one reading of one device.
type Sample struct {
	At     time.Time
	Device string // UUID of the device read
	// Device memory, bytes. Reserved is the driver's own reservation
	// (v2 API); -1 where unknown.
	Used, Reserved, Free, Total int64
	// Util is GPU utilization in percent, -1 where unknown.
	Util int
	// Processes lists compute processes. It is nil when the process list was
	// not read in this round (it is read at a lower rate) and non-nil, maybe
	// empty, when it was. The slice may share memory with the sampler and is
	// only valid until its next Sample call: use Clone to keep it.
	Processes []Process
	// Took is how long the driver calls of this round took.
	Took time.Duration
}

// Clone returns a copy of s that shares no memory with the sampler.
func (s Sample) Clone() Sample {
	if s.Processes != nil {
		s.Processes = append(make([]Process, 0, len(s.Processes)), s.Processes...)
	}
	return s
}

// Sampler reads GPU memory. Implementations are not safe for concurrent use.
type Sampler interface {
	// Devices lists the GPUs this sampler reads.
	Devices() ([]Device, error)
	// Sample reads every device once. withProcesses asks for the (slow)
	// process list too. The result is appended to dst[:0] and returned, so a
	// caller that reuses dst allocates nothing in the steady state.
	Sample(dst []Sample, withProcesses bool) ([]Sample, error)
	// Status says in one line what the sampler is ("NVML 12.550.54",
	// "simulated", "NVML unavailable: library not found").
	Status() string
	// Close releases the sampler.
	Close() error
}
