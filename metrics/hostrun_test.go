package metrics_test

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/record"
)

// A real CPU run (testdata/recordings/cpu_accum4.py): its device label says
// cpu, not "", and the HELP of the memory gauges says what they are on a
// CPU run, not only torch.cuda's name.
func TestExporterLabelsACPURun(t *testing.T) {
	q, e := newExporter(metrics.WithMonitorHost("vm"))
	r, err := record.Open("../testdata/recordings/cpu_accum4.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	feedRecording(t, q, r, nil)
	fams := scrape(t, e.Handler())
	if v := value(t, fams, "vramscope_allocated_bytes", map[string]string{"device": "cpu"}); v <= 0 {
		t.Errorf("allocated %v on a CPU run", v)
	}
	for _, name := range []string{"vramscope_allocated_bytes", "vramscope_reserved_bytes", "vramscope_max_allocated_bytes"} {
		if h := fams[name].GetHelp(); !strings.Contains(h, "RSS") {
			t.Errorf("%s HELP %q says nothing of a CPU run", name, h)
		}
	}
}
