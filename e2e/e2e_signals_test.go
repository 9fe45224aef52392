package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// paneChild is the pid of the one process the pane's shell runs.
func paneChild(t *testing.T, tm *tmux) int {
	t.Helper()
	shell := strings.TrimSpace(tm.run("display-message", "-p", "-t", "main", "#{pane_pid}"))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		kids, _ := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
		if f := strings.Fields(string(kids)); len(f) == 1 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	t.Fatalf("the pane's shell %s has no single child", shell)
	return 0
}

// checkGzip fails the test unless path is a whole gzip stream.
func checkGzip(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("gzip", "-t", path).CombinedOutput(); err != nil {
		t.Errorf("%s is not a whole gzip stream: %v %s", path, err, out)
	}
}

// TestSignalsEndTheLiveViewAsQuitting: SIGHUP (an SSH disconnect) killed
// the live view with status 129, leaving the recording's gzip unterminated,
// the socket file behind and the terminal in the alternate screen; an
// external SIGINT ended it with "program was killed" and status 1. SIGINT,
// SIGTERM and SIGHUP now end it as q does.
func TestSignalsEndTheLiveViewAsQuitting(t *testing.T) {
	bin := binary(t)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tm := newTmux(t)
			dir := shortTempDir(t)
			sock, rec := filepath.Join(dir, "s.sock"), filepath.Join(dir, "r.jsonl.gz")
			sh := "'" + bin + "' --socket '" + sock + "' --record '" + rec + "'; echo EXIT=$?; sleep 60"
			tm.run("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "sh", "-c", sh)
			tm.waitFor(20*time.Second, sock)
			if err := syscall.Kill(paneChild(t, tm), sig); err != nil {
				t.Fatal(err)
			}
			scr := tm.waitFor(10*time.Second, "EXIT=")
			if !strings.Contains(scr, "EXIT=0") || strings.Contains(scr, "killed") {
				t.Errorf("after %v the view ended so:\n%s", sig, scr)
			}
			if alt := strings.TrimSpace(tm.run("display-message", "-p", "-t", "main", "#{alternate_on}")); alt != "0" {
				t.Errorf("after %v the terminal is left in the alternate screen", sig)
			}
			checkGzip(t, rec)
			if _, err := os.Lstat(sock); err == nil {
				t.Errorf("after %v the socket file is left behind", sig)
			}
		})
	}
}

// TestRecordEndsOnSIGHUPAsOnSIGTERM: `record &` over SSH died of the
// disconnect's SIGHUP (status 129, gzip unterminated, socket left).
func TestRecordEndsOnSIGHUPAsOnSIGTERM(t *testing.T) {
	bin := binary(t)
	dir := shortTempDir(t)
	sock, rec := filepath.Join(dir, "s.sock"), filepath.Join(dir, "r.jsonl.gz")
	cmd := exec.Command(bin, "record", "--socket", sock, "-o", rec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(sock); err == nil {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGHUP)
	err := cmd.Wait()
	if err != nil {
		t.Errorf("record ended with %v after SIGHUP, want status 0", err)
	}
	checkGzip(t, rec)
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the socket file is left behind")
	}
}

// TestRunEndsWhenItsTerminalIsGone: when the command had exited and the
// live view's terminal was killed, `vramscope run` stayed alive for good.
// A monitor whose terminal is gone ends, closing what it wrote.
func TestRunEndsWhenItsTerminalIsGone(t *testing.T) {
	bin := binary(t)
	tm := newTmux(t)
	dir := shortTempDir(t)
	sh := "cd '" + dir + "' && exec '" + bin + "' run --log out.log -- true"
	tm.run("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "sh", "-c", sh)
	tm.waitFor(20*time.Second, "run: true")
	pid := strings.TrimSpace(tm.run("display-message", "-p", "-t", "main", "#{pane_pid}"))
	time.Sleep(500 * time.Millisecond) // the command has exited; the view stays
	tm.run("kill-server")
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile("/proc/" + pid + "/stat"); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("vramscope run (pid %s) still runs 3 s after its terminal was killed", pid)
	n, _ := strconv.Atoi(pid)
	syscall.Kill(n, syscall.SIGKILL)
}

// shortTempDir is a temporary directory short enough for a socket path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
