package report

import (
	"bufio"
	"fmt"
	"strconv"
	"unicode/utf8"

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

// writeHostTable prints a CPU run's step × phase table: the RSS at each
// phase's end, the phase's peak RSS and its time.
func (p *Process) writeHostTable(w *bufio.Writer) {
	named, width, stepW := p.tableWidths()
	legend := "MiB of host RSS; ≥ lower bound; = inferred"
	if p.accumulates() {
		legend += "; N× ms: N micro-steps, their times summed"
	}
	fmt.Fprintf(w, "\n  %*s  %-*s  %9s  %9s  %12s   (%s)\n", stepW, "step", width, "phase", "rss end", "peak rss", "ms", legend)
	row := func(st *Step) {
		for i, ph := range st.Phases {
			step := ""
			if i == 0 {
				step = fmt.Sprint(st.Step)
				if named && st.Model != "" {
					step += " " + textesc.String(st.Model)
				}
			}
			peak := ph.PeakAllocated.MiBString()
			switch {
			case ph.PeakInferred:
				peak = "=" + peak
			case !ph.PeakExact && ph.PeakAllocated.Known():
				peak = "≥" + peak
			}
			ms := strconv.FormatFloat(ph.DurationS*1000, 'f', 2, 64)
			if ph.Count > 1 {
				ms = fmt.Sprintf("%d× %s", ph.Count, ms)
			}
			fmt.Fprintf(w, "  %*s  %-*s  %9s  %9s  %12s\n", stepW+len(step)-utf8.RuneCountInString(step), step, width,
				textesc.String(ph.Phase), ph.AllocatedEnd.MiBString(), peak, ms)
		}
	}
	n := len(p.Steps)
	if n <= HeadSteps+TailSteps {
		for i := range p.Steps {
			row(&p.Steps[i])
		}
	} else {
		for i := range p.Steps[:HeadSteps] {
			row(&p.Steps[i])
		}
		fmt.Fprintf(w, "  %5s  … %d steps elided (first %d and last %d of %d shown) …\n", "", n-HeadSteps-TailSteps, HeadSteps, TailSteps, n)
		for i := n - TailSteps; i < n; i++ {
			row(&p.Steps[i])
		}
	}
	if kept := len(p.Steps); kept < p.StepsTotal {
		fmt.Fprintf(w, "  (the store kept %d of %d steps: the first and the most recent)\n", kept, p.StepsTotal)
	}
}

// hostLayerName is an anatomy row's name on a CPU run, "" for a row that
// has no meaning there (the allocator cache, the driver's views).
func hostLayerName(name string) string {
	switch name {
	case "other/temporaries":
		return "rest of process"
	case "allocator cache", "non-PyTorch", "other processes":
		return ""
	}
	return name
}

// accumulates reports whether a phase of some step ran more than once
// (gradient accumulation, or a model called several times per step).
func (p *Process) accumulates() bool {
	for i := range p.Steps {
		for _, ph := range p.Steps[i].Phases {
			if ph.Count > 1 {
				return true
			}
		}
	}
	return false
}
