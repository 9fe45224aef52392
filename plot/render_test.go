package plot

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// A recording with no memory data drew an empty chart (y axis 0 to
// 1.2e-09 GiB) and exited 0: it is an error that says so.
func TestPlotWithoutMemoryDataFails(t *testing.T) {
	s := session.New()
	s.Apply(session.Event{Conn: 1, Msg: &ipc.Message{Type: ipc.TypeHello, Session: "s", PID: 7}})
	err := Write(&bytes.Buffer{}, "svg", s, s.Processes()[0], Options{})
	if !errors.Is(err, ErrNoMemoryData) || !strings.Contains(err.Error(), "nothing to plot") {
		t.Fatalf("err = %v, want ErrNoMemoryData", err)
	}
}

// The peak and warmup labels sat on the data: the y range keeps two label
// rows above every curve (the legend is drawn outside the data area:
// layout_test.go).
func TestPlotKeepsLabelsOffTheData(t *testing.T) {
	s, _, _, err := export.Load("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Processes()[0]
	ch, err := Build(s, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dataMax := float64(max(p.Reserved.Max(), p.GPU.Max(), p.MaxAllocated.Max())) / gib
	area := 5*72.0 - 60
	if free := (ch.Plot.Y.Max - dataMax) / ch.Plot.Y.Max * area; free < 2*row-0.01 {
		t.Errorf("%.0f pt above the data, want %.0f for two label rows", free, 2*row)
	}
}

// The PNG's title read "NVIDIAA100": its renderer kerns "A A" together.
// A PNG's text uses no-break spaces, which it does not kern; the SVG's
// keeps plain spaces.
func TestPNGTextKeepsItsSpaces(t *testing.T) {
	s, _, _, err := export.Load("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Processes()[0]
	png, err := Build(s, p, Options{png: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(png.Plot.Title.Text, "NVIDIA\u00a0H100") {
		t.Errorf("PNG title %q", png.Plot.Title.Text)
	}
	svg, _ := Build(s, p, Options{})
	if !strings.Contains(svg.Plot.Title.Text, "NVIDIA H100") {
		t.Errorf("SVG title %q", svg.Plot.Title.Text)
	}
}

// The 1 Hz NVML reading was held as a dashed line until the next one,
// drawn flat below reserved while the allocator grew. It is drawn as
// points: the only dashed line left is the warmup marker.
func TestNVMLReadingsArePoints(t *testing.T) {
	s, _, _, err := export.Load("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "svg", s, s.Processes()[0], Options{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "stroke-dasharray"); n != 1 {
		t.Errorf("%d dashed lines, want 1 (the warmup marker)", n)
	}
	if !strings.Contains(buf.String(), "NVML process used (readings)") {
		t.Error("the legend does not say the NVML figure is readings")
	}
}

// A CPU run's allocated and reserved are both its RSS: the plot draws it
// once, named RSS, on a MiB axis for its 0.25 GiB
// (testdata/recordings/cpu_accum4.py, a real run).
func TestPlotOfACPURunDrawsTheRSSOnceInMiB(t *testing.T) {
	s, _, _, err := export.Load("../testdata/recordings/cpu_accum4.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "svg", s, s.Processes()[0], Options{}); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	if !strings.Contains(svg, ">RSS<") || strings.Contains(svg, ">reserved<") || strings.Contains(svg, ">allocated<") {
		t.Errorf("the legend of a CPU run's plot is not RSS alone")
	}
	// A 248 MiB process: its axis is in MiB (it read 0.2 and 0.4 GiB).
	if !strings.Contains(svg, ">MiB<") || strings.Contains(svg, ">GiB<") {
		t.Errorf("the y axis of a 0.25 GiB process is not in MiB")
	}
}
