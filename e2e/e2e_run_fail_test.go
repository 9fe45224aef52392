package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A script that dies before training under `vramscope run`'s live view:
// the screen says the command exited, with its status, and shows its
// traceback's last line, instead of waiting for a training process.
func TestTmuxRunScriptDyingBeforeTrainingSaysWhy(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "broken.py")
	if err := os.WriteFile(script, []byte("import sys\nprint('loading')\nimport vramscope_no_such_module\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tm := newTmux(t)
	sh := "cd '" + dir + "' && '" + bin + "' run --log train.log -- python3 broken.py; echo EXIT=$?; sleep 60"
	tm.run("new-session", "-d", "-s", "main", "-x", "80", "-y", "24", "sh", "-c", sh)
	tm.waitFor(30*time.Second, "■ command exited", "exited with status 1 before any training",
		"ModuleNotFoundError: No module named 'vramscope_no_such_module'")
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(10*time.Second, "EXIT=1")
}
