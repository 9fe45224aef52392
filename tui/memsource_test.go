package tui

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// TestSourceText: the header names each non-NVIDIA source and says what it
// cannot give; CUDA and older hooks keep the NVML header.
func TestSourceText(t *testing.T) {
	cases := []struct {
		src  *ipc.MemSource
		cuda *ipc.CUDADevice
		want []string // substrings; nil: not shown
	}{
		{nil, nil, nil},
		{&ipc.MemSource{Kind: "cuda", Peaks: "exact"}, &ipc.CUDADevice{Name: "NVIDIA H100"}, nil},
		{&ipc.MemSource{Kind: "cpu", Peaks: "exact"}, nil, []string{"CPU run", "RSS", "no GPU"}},
		{&ipc.MemSource{Kind: "cpu", Peaks: "none"}, nil, []string{"not readable"}},
		{&ipc.MemSource{Kind: "rocm", Peaks: "exact"}, &ipc.CUDADevice{Name: "AMD Instinct MI300X"}, []string{"AMD Instinct MI300X", "ROCm", "no NVML"}},
		{&ipc.MemSource{Kind: "xpu", Peaks: "counter", Name: "Intel Max 1550"}, nil, []string{"Intel Max 1550", "no NVML"}},
		{&ipc.MemSource{Kind: "mps", Peaks: "samples"}, nil, []string{"Apple MPS", "no peak counter"}},
	}
	for _, c := range cases {
		p := &session.Process{}
		p.Hello.MemSource, p.Hello.CUDA = c.src, c.cuda
		got, ok := sourceText(p)
		if ok != (c.want != nil) {
			t.Errorf("%+v: shown %v", c.src, ok)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: %q lacks %q", c.src, got, w)
			}
		}
	}
	if _, ok := sourceText(nil); ok {
		t.Error("no process: nothing")
	}
}
