package diff_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/export"
)

// Two real CPU runs of different models (testdata/recordings/
// cpu_torch113.py, 0.1 M parameters, recorded as cpu_rss_torch113; and
// cpu_accum4.py, 0.3 M): the diff says the models differ and how, and its
// per-phase table gives the peak RSS once and each phase's time, not the
// RSS again as "reserved". The same script recorded twice differs in
// nothing.
func TestDiffSaysWhatDiffersAndCPURowsShowTime(t *testing.T) {
	a, _, _, err := export.Load("../testdata/recordings/cpu_rss_torch113.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := export.Load("../testdata/recordings/cpu_accum4.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	res := diff.Compare(a, b, "small", "large")
	if len(res.Pairs) != 1 {
		t.Fatalf("%d pairs", len(res.Pairs))
	}
	if got := strings.Join(res.Pairs[0].Differs, "; "); got != "parameters 0.1 M → 0.3 M" {
		t.Errorf("differs %q", got)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"⚠ the runs differ: parameters 0.1 M → 0.3 M", "peak RSS (MiB)", "mean time per step (ms)", "steady-state peak: RSS "} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "reserved") {
		t.Errorf("a diff of CPU runs speaks of reserved memory:\n%s", text)
	}
	same := diff.Compare(load(t, "s001.jsonl.gz"), load(t, "live.jsonl.gz"), "s001", "live")
	if d := same.Pairs[0].Differs; len(d) != 0 {
		t.Errorf("the same script twice differs in %v", d)
	}
}
