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
	w, known := ipc.WordsOf(s.Kind)
	switch {
	case !known:
		return "memory source " + textesc.String(s.Kind), true
	case w.Header == "":
		return "", false
	case s.Kind == ipc.SourceCPU && s.Peaks == ipc.PeaksNone:
		return ipc.HeaderNoFigures, true
	}
	name := w.Name
	switch c := p.Hello.CUDA; {
	case w.NameFrom == ipc.NameFromCUDA && c != nil && c.Name != "":
		name = textesc.String(c.Name)
	case w.NameFrom == ipc.NameFromSource && s.Name != "":
		name = textesc.String(s.Name)
	}
	return name + w.Header, true
}
