package tui

import (
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// sourceText names a process's memory source in the header where it is not
// an NVIDIA GPU (hello's mem_source, docs/protocol.md "Memory sources"),
// and says plainly what that source cannot give; ok is false for CUDA and
// for an older hook.
func sourceText(p *session.Process) (text string, ok bool) {
	if p == nil || p.Hello.MemSource == nil {
		return "", false
	}
	s := p.Hello.MemSource
	switch s.Kind {
	case ipc.SourceCPU:
		if s.Peaks == ipc.PeaksNone {
			return "CPU run · host memory not readable here (no /proc)", true
		}
		return "CPU run · host memory: RSS (allocated = reserved = RSS) · no GPU", true
	case ipc.SourceROCm:
		name := "AMD GPU"
		if c := p.Hello.CUDA; c != nil && c.Name != "" {
			name = textesc.String(c.Name)
		}
		return name + " · ROCm allocator · no NVML (NVIDIA only): no driver view", true
	case ipc.SourceXPU:
		name := "Intel XPU"
		if s.Name != "" {
			name = textesc.String(s.Name)
		}
		return name + " · XPU allocator · no NVML (NVIDIA only): no driver view", true
	case ipc.SourceMPS:
		return "Apple MPS · reserved = driver memory · no peak counter: peaks from reads and samples", true
	case ipc.SourceCUDA:
		return "", false
	}
	return "memory source " + textesc.String(s.Kind), true
}
