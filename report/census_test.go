package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/fixture"
	"github.com/vramscope/vramscope/ipc"
)

// The report shows the newest census, what grew (the headline names the
// holder), and the allocator history's sites; every name from the hook is
// escaped in the text and kept as it is in the JSON.
func TestReportShowsTheCensusAndTheCaptureSites(t *testing.T) {
	msgs := generate(t, "steady", 20)
	for i, l := range fixture.CensusLines(t) {
		m, err := ipc.Decode([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		m.T = msgs[len(msgs)-1].T + float64(i+1)
		m.Seq = msgs[len(msgs)-1].Seq + uint64(i+1)
		msgs = append(msgs, *m)
	}
	line := 31
	last := msgs[len(msgs)-1].Census
	last.Capture = &ipc.CensusCapture{File: "/runs/vramscope-snapshot-x.pickle", FromStep: 11, ToStep: 16, Entries: 900, MaxEntries: 100000, CostMS: 12.5,
		Sites: []ipc.CaptureSite{{File: "/home/ada/train\x1b]0;x\x07.py", Line: &line, Function: "forward", Bytes: 5 << 20, Count: 5}}}
	r := Build(storeOf(msgs, false))
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"census of live cpu tensors at step 16 (followup",
		"local losses[...] (list) train /home/ada/train.py:19: 16 tensors, 64 B, 16 graphs of 116 nodes (backward freed their saved tensors)",
		"allocator history, steps 11–16: 900 entries of 100000, 12.5 ms; snapshot /runs/vramscope-snapshot-x.pickle",
		`/home/ada/train\x1b]0;x\x07.py:31 forward(): 5 MiB still live in 5 allocations`,
		"what grew between the censuses of steps 11 and 16",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b]0;") {
		t.Error("a raw escape from the hook reached the text")
	}
	p := r.Processes[0]
	if !strings.HasPrefix(p.Diagnosis.Headline, "held by losses[...] (list) in train(), train.py:19") {
		t.Errorf("headline %q", p.Diagnosis.Headline)
	}
	if p.Census == nil || p.Census.Capture == nil || p.Census.Capture.Sites[0].File != "/home/ada/train\x1b]0;x\x07.py" {
		t.Errorf("JSON census %+v", p.Census)
	}
}
