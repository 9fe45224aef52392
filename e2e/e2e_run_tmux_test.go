package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `vramscope run` with the live view, in a real terminal (tmux): the
// command's output goes to --log, the view shows its steps, the view stays
// after the command ends, and quitting the view while the command runs
// (q asks once, a second q confirms) interrupts it and passes its exit
// code on.
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
		{"the command ends first", "--steps 6", []string{"run: ", "zero_grad", "backward", "exited"}, "trained 6 steps", "EXIT=0", "trained 6 steps"},
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
			if tc.ended == "" { // still training: the first q asks
				tm.waitFor(10*time.Second, "q again ends the training")
				if scr := tm.screen(); strings.Contains(scr, "EXIT=") {
					t.Fatalf("the first q ended the training:\n%s", scr)
				}
				tm.run("send-keys", "-t", "main", "q")
			}
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

// A SIGTERM to vramscope while the view is up (a scheduler ending the job)
// reaches the command at once; the view ends, and the command's own exit
// code comes back.
func TestTmuxRunSIGTERM(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	tm := newTmux(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "train.log")
	sh := "cd '" + dir + "' && '" + bin + "' run --log '" + log + "' -- '" + py + "' '" + script + "' --steps 100000 --sleep 0.05 --trap" +
		"; echo EXIT=$?; sleep 60"
	tm.run("new-session", "-d", "-s", "main", "-x", "160", "-y", "48", "sh", "-c", sh)
	tm.waitFor(90*time.Second, "run: ", "backward", "● connected")
	// vramscope is the pane's shell's only child.
	shell := strings.TrimSpace(tm.run("display-message", "-p", "-t", "main", "#{pane_pid}"))
	kids, err := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
	if err != nil || len(strings.Fields(string(kids))) != 1 {
		t.Fatalf("children of the pane's shell %s: %q (%v)", shell, kids, err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(kids))[0])
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	scr := tm.waitFor(30*time.Second, "EXIT=42")
	if strings.Contains(scr, "interrupting") {
		t.Errorf("the command was interrupted a second time after the SIGTERM:\n%s", scr)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "got SIGTERM") {
		t.Errorf("the command's log lacks its SIGTERM handler's line:\n%s", b)
	}
}

// Headless in a terminal: Ctrl-C reaches the command from the terminal (it
// shares vramscope's foreground process group); vramscope outlives it to
// write the recording's summary and passes the command's exit code on.
// (Whether vramscope also sends a second SIGINT cannot be seen here: two
// SIGINTs that close together are delivered to Python as one.)
func TestTmuxRunHeadlessCtrlC(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	tm := newTmux(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	// The shell traps INT (a handler, reset for its children) to outlive the Ctrl-C.
	sh := "trap true INT; cd '" + dir + "' && '" + bin + "' run --record run.jsonl -- '" + py + "' '" + script +
		"' --steps 100000 --sleep 0.05 --count-int --ready '" + ready + "'; echo EXIT=$?; sleep 60"
	tm.run("new-session", "-d", "-s", "main", "-x", "160", "-y", "48", "sh", "-c", sh)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the script never became ready:\n%s", tm.screen())
		}
	}
	tm.run("send-keys", "-t", "main", "C-c")
	scr := tm.waitFor(30*time.Second, "EXIT=3")
	if !strings.Contains(scr, "SIGINTs: ") {
		t.Errorf("the command did not report its SIGINT:\n%s", scr)
	}
	if !strings.Contains(scr, "vramscope: 1 client,") {
		t.Errorf("vramscope did not outlive Ctrl-C to write its summary:\n%s", scr)
	}
}
