package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `vramscope run` with the live view, in a real terminal (tmux): the
// command's output goes to --log, the view shows its steps, the view stays
// after the command ends, and quitting the view while the command runs
// interrupts it and passes its exit code on.
func TestTmuxRun(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	tests := []struct {
		name  string
		args  string
		wait  []string // on screen before q
		ended string   // in the log before q: the command has ended
		exit  string
		inLog string
	}{
		{"the command ends first", "--steps 6", []string{"run: ", "zero_grad", "backward", "disconnected"}, "trained 6 steps", "EXIT=0", "trained 6 steps"},
		{"quit while it trains", "--steps 100000 --sleep 0.05", []string{"run: ", "zero_grad", "backward", "● connected"}, "", "EXIT=130", "KeyboardInterrupt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTmux(t)
			dir := t.TempDir()
			log := filepath.Join(dir, "train.log")
			sh := "cd '" + dir + "' && '" + bin + "' run --log '" + log + "' -- '" + py + "' '" + script + "' " + tc.args +
				"; echo EXIT=$?; sleep 60"
			tm.run("new-session", "-d", "-s", "main", "-x", "160", "-y", "48", "sh", "-c", sh)
			tm.waitFor(90*time.Second, tc.wait...)
			if tc.ended != "" {
				// The hook's goodbye comes before the interpreter's exit:
				// wait for the script's last line, then for the exit.
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if b, _ := os.ReadFile(log); strings.Contains(string(b), tc.ended) {
						break
					}
				}
				time.Sleep(2 * time.Second)
			}
			tm.run("send-keys", "-t", "main", "q")
			scr := tm.waitFor(30*time.Second, tc.exit)
			if !strings.Contains(scr, "the command's output is in "+log) {
				t.Errorf("no word on where the output went:\n%s", scr)
			}
			b, err := os.ReadFile(log)
			if err != nil || !strings.Contains(string(b), tc.inLog) {
				t.Errorf("log %s (%v) lacks %q:\n%s", log, err, tc.inLog, b)
			}
		})
	}
}
