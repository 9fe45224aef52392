package report

import (
	"fmt"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
)

// Memory says which memory a process's figures read (hello's mem_source,
// docs/protocol.md "Memory sources") and what that source cannot give.
type Memory struct {
	// Kind is cuda, rocm, xpu, mps or cpu; "" for an older hook's CPU run
	// (no memory figures).
	Kind string `json:"kind"`
	// Peaks is how the peaks come about: exact, counter, samples, process
	// or none ("" when the hook did not say).
	Peaks string `json:"peaks"`
	// What names the figures in words.
	What string `json:"what"`
	// NotAvailable lists what this source cannot give, in words.
	NotAvailable []string `json:"not_available"`
}

// memoryOf describes the memory source of hello h.
func memoryOf(h *ipc.Message) *Memory {
	m := &Memory{Kind: ipc.SourceKind(h), NotAvailable: []string{}}
	if s := h.MemSource; s != nil {
		m.Peaks = s.Peaks
	} else if h.Hook != nil && h.Hook.ExactPeaks {
		m.Peaks = ipc.PeaksExact
	}
	noNVML := "a driver-side view (NVML is NVIDIA only): no device total used, no non-PyTorch memory"
	switch m.Kind {
	case ipc.SourceCUDA:
		m.What = "CUDA caching allocator (torch.cuda)"
	case ipc.SourceROCm:
		m.What = "ROCm caching allocator (torch.cuda on a HIP build)"
		m.NotAvailable = append(m.NotAvailable, noNVML)
	case ipc.SourceXPU:
		m.What = "XPU caching allocator (torch.xpu.memory_stats)"
		m.NotAvailable = append(m.NotAvailable, noNVML)
	case ipc.SourceMPS:
		m.What = "MPS: allocated = torch.mps.current_allocated_memory(), reserved = driver_allocated_memory()"
		m.NotAvailable = append(m.NotAvailable, "a peak counter (MPS has none: a peak is the largest read or sample, a lower bound)", noNVML)
	case ipc.SourceCPU:
		m.What = "host memory: the process's resident set size (RSS)"
		m.NotAvailable = append(m.NotAvailable, "an allocator split (allocated = reserved = RSS)", "a device-side view (no GPU)")
		if m.Peaks == ipc.PeaksProcess {
			m.NotAvailable = append(m.NotAvailable, "phase peaks (the kernel cannot reset the peak RSS here: a peak is the process's lifetime peak)")
		}
	case "":
		m.What = "none: the hook read no memory"
		m.NotAvailable = append(m.NotAvailable, "memory figures (an older hook on a CPU run)")
	default:
		m.What = "unknown source " + textesc.String(m.Kind)
	}
	if m.Peaks == ipc.PeaksNone {
		m.NotAvailable = append(m.NotAvailable, "memory figures (this system has no stdlib read of the RSS)")
	}
	return m
}

// host is true when the figures are the process's host memory.
func (p *Process) host() bool {
	return p.Memory != nil && p.Memory.Kind == ipc.SourceCPU
}

// deviceLabel names the device in the header line.
func (p *Process) deviceLabel() string {
	if d := p.Device; d != nil {
		label := fmt.Sprintf("%s (cuda:%d, %s)", textesc.String(d.Name), d.Index, d.Total.Human())
		if p.Memory != nil && p.Memory.Kind == ipc.SourceROCm {
			label += " · ROCm"
		}
		return label
	}
	m := p.Memory
	if m == nil {
		return "CPU (no CUDA device)"
	}
	switch m.Kind {
	case ipc.SourceCPU:
		return "CPU · host memory (RSS)"
	case ipc.SourceXPU:
		return "Intel XPU"
	case ipc.SourceMPS:
		return "Apple MPS"
	case "":
		return "CPU (no CUDA device)"
	}
	return "device " + textesc.String(m.Kind)
}
