package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 24 item 9: a recording with no memory data (a CPU run) drew an
// empty chart and exited 0. The command fails with one line and writes no
// file.
func TestPlotWithoutMemoryDataExitsNonZero(t *testing.T) {
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "cpu.svg")
	msg, err := exec.Command(bin, "plot", "testdata/recordings/cpu_torch113.jsonl.gz", "-o", out).CombinedOutput()
	if err == nil {
		t.Fatalf("plot of a run with no memory data succeeded:\n%s", msg)
	}
	if s := strings.TrimSpace(string(msg)); strings.Count(s, "\n") != 0 || !strings.Contains(s, "no memory data") {
		t.Errorf("want one line saying there is no memory data, got:\n%s", msg)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}
