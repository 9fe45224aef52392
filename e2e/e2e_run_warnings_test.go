package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunAttachesUnderPythonWError: with an odd VRAMSCOPE_* value, the
// hook's warning about it became an exception under `python -W error`, and
// `vramscope run` recorded no client at all. A warning is advice: the
// command trains hooked, with nothing raised.
func TestRunAttachesUnderPythonWError(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	out := filepath.Join(t.TempDir(), "run.jsonl.gz")
	cmd := exec.Command(bin, "run", "--record", out, "--", py, "-W", "error", script, "--steps", "3")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "VRAMSCOPE_SAMPLE_HZ=fast")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !strings.Contains(string(b), "vramscope: 1 client,") || !strings.Contains(string(b), " 3 steps,") {
		t.Errorf("the run was not hooked under -W error:\n%s", b)
	}
}
