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
	if w, ok := ipc.WordsOf(m.Kind); ok {
		m.What = w.What
		m.NotAvailable = append(m.NotAvailable, w.Lacks...)
	} else {
		m.What = "unknown source " + textesc.String(m.Kind)
	}
	if m.Kind == ipc.SourceCPU && m.Peaks == ipc.PeaksProcess {
		m.NotAvailable = append(m.NotAvailable, ipc.LacksPhasePeaks)
	}
	if m.Peaks == ipc.PeaksNone {
		m.NotAvailable = append(m.NotAvailable, ipc.LacksFigures)
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
		if p.Memory != nil {
			w, _ := ipc.WordsOf(p.Memory.Kind)
			label += w.Tag
		}
		return label
	}
	kind := ""
	if p.Memory != nil {
		kind = p.Memory.Kind
	}
	if w, _ := ipc.WordsOf(kind); w.Label != "" {
		return w.Label
	}
	return "device " + textesc.String(kind)
}
