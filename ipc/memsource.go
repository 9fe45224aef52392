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

// SourceWords is what the views say of a memory source: the words of every
// view for one device family are in sourceWords below, beside the kinds,
// so that a new family is one entry there (and a case in the hook's
// _devices.py).
type SourceWords struct {
	// Name names the device in the TUI's header when the hook gives no
	// name ("AMD GPU"); "" where the header names none (CUDA, CPU).
	Name string
	// NameFrom is where the hello gives the device's own name, which the
	// TUI shows instead of Name: NameFromCUDA (its cuda object),
	// NameFromSource (mem_source.name) or "" (nowhere).
	NameFrom string
	// Label is the report header's device label for a process without a
	// CUDA device ("Apple MPS"); "" where the report names the kind as it
	// is.
	Label string
	// Tag follows a CUDA device's name in the report's header (" · ROCm").
	Tag string
	// What names the figures in words (the report's memory.what).
	What string
	// Lacks lists what the source cannot give, in words (the report's
	// memory.not_available).
	Lacks []string
	// Header is what the TUI's header says of the source after the
	// device's name (alone where Name is ""); "" for CUDA, which the
	// header does not describe.
	Header string
	// Figure and Peak name the one figure of a source whose allocated and
	// reserved are the same ("RSS", "peak RSS"): the chart, the plot and
	// diff draw and name it once; "" where allocated and reserved differ.
	Figure, Peak string
	// Rest names the anatomy's remainder where it is not the allocator's
	// temporaries ("rest of process": the interpreter, libraries and every
	// other object); such a source has no allocator cache or driver view,
	// and the anatomy leaves those layers out. "" for allocators.
	Rest string
}

// Where a hello names its device (SourceWords.NameFrom).
const (
	NameFromCUDA   = "cuda"
	NameFromSource = "mem_source"
)

// noDriverView is what a non-NVIDIA GPU's source cannot give: NVML's
// figures.
const noDriverView = "a driver-side view (NVML is NVIDIA only): no device total used, no non-PyTorch memory"

// sourceWords are the words of each source this build knows.
var sourceWords = map[string]SourceWords{
	SourceCUDA: {What: "CUDA caching allocator (torch.cuda)"},
	SourceROCm: {Name: "AMD GPU", NameFrom: NameFromCUDA, Tag: " · ROCm", What: "ROCm caching allocator (torch.cuda on a HIP build)",
		Lacks: []string{noDriverView}, Header: " · ROCm allocator · no NVML (NVIDIA only): no driver view"},
	SourceXPU: {Name: "Intel XPU", NameFrom: NameFromSource, Label: "Intel XPU", What: "XPU caching allocator (torch.xpu.memory_stats)",
		Lacks: []string{noDriverView}, Header: " · XPU allocator · no NVML (NVIDIA only): no driver view"},
	SourceMPS: {Name: "Apple MPS", Label: "Apple MPS", What: "MPS: allocated = torch.mps.current_allocated_memory(), reserved = driver_allocated_memory()",
		Lacks:  []string{"a peak counter (MPS has none: a peak is the largest read or sample, a lower bound)", noDriverView},
		Header: " · reserved = driver memory · no peak counter: peaks from reads and samples"},
	SourceCPU: {Label: "CPU · host memory (RSS)", What: "host memory: the process's resident set size (RSS)",
		Lacks:  []string{"an allocator split (allocated = reserved = RSS)", "a device-side view (no GPU)"},
		Header: "CPU run · host memory: RSS (allocated = reserved = RSS) · no GPU",
		Figure: "RSS", Peak: "peak RSS", Rest: "rest of process"},
	"": {Label: "CPU (no CUDA device)", What: "none: the hook read no memory",
		Lacks: []string{"memory figures (an older hook on a CPU run)"}},
}

// What each peak mode cannot give, where it takes something away.
const (
	// LacksPhasePeaks is what PeaksProcess cannot give on a CPU run.
	LacksPhasePeaks = "phase peaks (the kernel cannot reset the peak RSS here: a peak is the process's lifetime peak)"
	// LacksFigures is what PeaksNone cannot give.
	LacksFigures = "memory figures (this system has no stdlib read of the RSS)"
	// HeaderNoFigures is the TUI header of a CPU run with PeaksNone.
	HeaderNoFigures = "CPU run · host memory not readable here (no /proc)"
)

// WordsOf returns the words of source kind (SourceKind's answer: "" is an
// older hook's CPU run); ok is false for a kind this build does not know,
// which a view names as it is.
func WordsOf(kind string) (SourceWords, bool) {
	w, ok := sourceWords[kind]
	return w, ok
}

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
