//go:build linux

package launch

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain doubles as a helper: with VS_FOREGROUND_HELPER=1 the test binary
// only prints what Foreground says, for TestForeground to read in a terminal.
func TestMain(m *testing.M) {
	if os.Getenv("VS_FOREGROUND_HELPER") == "1" {
		fmt.Printf("FOREGROUND=%v\n", Foreground())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Foreground decides whether a Ctrl-C already reached the command, so it
// is checked in a real terminal (tmux): true in the foreground, false for a
// background job and without a terminal on stdin.
func TestForeground(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_TMUX") == "1" {
			t.Fatal("tmux is required (VRAMSCOPE_REQUIRE_TMUX=1) but not installed")
		}
		t.Skip("!!! tmux not installed: Foreground is not checked in a terminal !!!")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock := fmt.Sprintf("vs-launch-fg-%d", os.Getpid()) // a server of this run's own
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() })
	// bash -i: an interactive shell with job control, as a user's terminal has.
	script := fmt.Sprintf("export VS_FOREGROUND_HELPER=1; echo fg; '%[1]s'; echo bg; '%[1]s' & wait; echo nostdin; '%[1]s' </dev/null; echo DONE; sleep 30", exe)
	if out, err := exec.Command("tmux", "-L", sock, "new-session", "-d", "-s", "m", "-x", "120", "-y", "30", "bash", "--norc", "-i", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	var scr string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, _ := exec.Command("tmux", "-L", sock, "capture-pane", "-p", "-t", "m").Output()
		if scr = string(b); strings.Contains(scr, "DONE") {
			break
		}
	}
	var got []string // in order: foreground, background job, no terminal on stdin
	for _, f := range strings.Fields(scr) {
		if v, ok := strings.CutPrefix(f, "FOREGROUND="); ok {
			got = append(got, v)
		}
	}
	if strings.Join(got, " ") != "true false false" || !strings.Contains(scr, "DONE") {
		t.Errorf("in a terminal: got %v, want [true false false]:\n%s", got, scr)
	}
}
