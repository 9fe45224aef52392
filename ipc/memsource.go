package ipc

import (
	"errors"
	"fmt"
)

// Memory sources a hook names in hello's mem_source.kind (docs/protocol.md,
// "Memory sources"). A hook may name another; the monitor shows it as it is.
const (
	SourceCUDA = "cuda" // NVIDIA, torch.cuda's caching allocator
	SourceROCm = "rocm" // AMD, the same allocator through torch.cuda (HIP build)
	SourceXPU  = "xpu"  // Intel, torch.xpu.memory_stats
	SourceMPS  = "mps"  // Apple, torch.mps current/driver allocated memory
	SourceCPU  = "cpu"  // the process's resident memory (RSS)
)

// How a source's max_allocated and max_reserved come about (mem_source.peaks).
const (
	PeaksExact   = "exact"   // reset after each phase/mark read: exact since the previous read
	PeaksCounter = "counter" // the allocator's peak counter since start or the user's reset
	PeaksSamples = "samples" // no peak counter: each read's peak is its own value
	PeaksProcess = "process" // host: the process's lifetime peak RSS, never reset
	PeaksNone    = "none"    // nothing read (mem is null)
)

// MemSource says which memory a process's mem figures read and what its
// peaks are. Absent in hooks before it: a hello with a cuda object is
// then CUDA, one without is a run whose mem is null.
type MemSource struct {
	// Kind is the device family: cuda, rocm, xpu, mps or cpu.
	Kind string `json:"kind"`
	// Peaks says how max_* figures come about (the Peaks* constants).
	Peaks string `json:"peaks,omitempty"`
	// Name is the device's name where the source has one (xpu).
	Name string `json:"name,omitempty"`
	// Total is the device's memory in bytes where known (xpu; mps's
	// recommended maximum); 0 when unknown.
	Total int64 `json:"total,omitempty"`
}

// validate bounds a mem_source: kind and peaks are short lower-case tokens
// (they become labels), name a bounded string, total a byte count.
func (s *MemSource) validate() error {
	if s.Kind == "" {
		return errors.New("field mem_source.kind: missing")
	}
	if err := token("mem_source.kind", s.Kind); err != nil {
		return err
	}
	if s.Peaks != "" {
		if err := token("mem_source.peaks", s.Peaks); err != nil {
			return err
		}
	}
	if len(s.Name) > maxString {
		return fmt.Errorf("field mem_source.name: longer than %d bytes", maxString)
	}
	return size("mem_source.total", s.Total)
}

func token(field, v string) error {
	if len(v) > 32 {
		return fmt.Errorf("field %s: longer than 32 bytes", field)
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("field %s: character %q not allowed", field, r)
		}
	}
	return nil
}

// SourceKind is the memory source of a process whose hello is h: its
// mem_source.kind, else "cuda" for an older hook with a CUDA device, else
// "" (an older hook's CPU run: no memory figures).
func SourceKind(h *Message) string {
	if h == nil {
		return ""
	}
	if h.MemSource != nil {
		return h.MemSource.Kind
	}
	if h.CUDA != nil {
		return SourceCUDA
	}
	return ""
}
