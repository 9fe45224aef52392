package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `vramscope run` end to end: the real binary runs testdata/run/train.py, a
// CPU training script with no vramscope in it, under Debian's torch, and the
// recording must hold the phases auto-attach marked.

// torchPython returns a Python with torch, or skips loudly (fails under
// VRAMSCOPE_REQUIRE_TORCH=1, as CI sets).
func torchPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_TORCH") == "1" {
			t.Fatalf("%s cannot import torch (VRAMSCOPE_REQUIRE_TORCH=1): %v", py, err)
		}
		t.Skipf("!!! %s has no torch: vramscope run end-to-end tests SKIPPED !!!", py)
	}
	return py
}

type runResult struct {
	code           int
	stdout, stderr string
}

// runCmd runs the binary with args; start, when set, is called once the
// process has started (to signal it).
func runCmd(t *testing.T, bin string, start func(*os.Process), args ...string) runResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir() // the child's output log and nothing else lands here
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if start != nil {
		start(cmd.Process)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("vramscope %v did not end in 3 minutes\nstdout:\n%s\nstderr:\n%s", args, o.String(), e.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return runResult{code, o.String(), e.String()}
}

func reportOf(t *testing.T, bin, path string) reportJSON {
	t.Helper()
	js, _ := runBin(t, bin, "report", "--json", path)
	var rep reportJSON
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, js)
	}
	return rep
}

func phasesOf(rep reportJSON, proc, step int) []string {
	var names []string
	for _, s := range rep.Processes[proc].Steps {
		if s.Step == step {
			for _, p := range s.Phases {
				names = append(names, p.Phase)
			}
		}
	}
	return names
}

func trainScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "run", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunAutoAttachesAndRecords(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	out := filepath.Join(t.TempDir(), "run.jsonl.gz")
	r := runCmd(t, bin, nil, "run", "--record", out, "--", py, script, "--steps", "4")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "trained 4 steps") {
		t.Errorf("the command's stdout did not pass through: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "vramscope: 1 client,") || !strings.Contains(r.stderr, " 4 steps,") {
		t.Errorf("summary: %s", r.stderr)
	}
	if strings.Contains(r.stderr, "Warning") {
		t.Errorf("auto-attach made the training warn:\n%s", r.stderr)
	}
	rep := reportOf(t, bin, out)
	if len(rep.Processes) != 1 || len(rep.Processes[0].Steps) != 4 {
		t.Fatalf("want 1 process with 4 steps, got %+v", rep.Processes)
	}
	// Auto-attach hooks at the first training forward: step 0 starts there
	// (its zero_grad ran before), later steps carry all five phases. The
	// eval-mode pass under no_grad before training is not taken for a step.
	if got := strings.Join(phasesOf(rep, 0, 0), ","); got != "forward,loss,backward,step" {
		t.Errorf("step 0 phases = %s", got)
	}
	if got := strings.Join(phasesOf(rep, 0, 1), ","); got != "zero_grad,forward,loss,backward,step" {
		t.Errorf("step 1 phases = %s", got)
	}
}

func TestRunExplicitWatchWins(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	out := filepath.Join(t.TempDir(), "run.jsonl")
	// -W error: any warning (a double watch, a replaced handle) fails the run.
	r := runCmd(t, bin, nil, "run", "--record", out, "--", py, "-W", "error", script, "--steps", "3", "--watch")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	rep := reportOf(t, bin, out)
	if len(rep.Processes) != 1 || len(rep.Processes[0].Steps) != 3 {
		t.Fatalf("want 1 process with 3 steps, got %+v", rep.Processes)
	}
	// The script's own watch() runs before its first zero_grad, which
	// auto-attach (hooking at the first training forward) cannot see.
	if got := strings.Join(phasesOf(rep, 0, 0), ","); !strings.Contains(got, "zero_grad") {
		t.Errorf("step 0 phases = %s: the explicit watch() did not take over", got)
	}
}

func TestRunTwoProcesses(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	out := filepath.Join(t.TempDir(), "run.jsonl")
	r := runCmd(t, bin, nil, "run", "--record", out, "--", py, script, "--steps", "3", "--spawn")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	rep := reportOf(t, bin, out)
	if len(rep.Processes) != 2 {
		t.Fatalf("want 2 processes (the script and the one it started), got %d", len(rep.Processes))
	}
	for i, p := range rep.Processes {
		if len(p.Steps) != 3 {
			t.Errorf("process %d (pid %d): %d steps, want 3", i, p.PID, len(p.Steps))
		}
	}
}

func TestRunPassesTheExitCodeOn(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	out := filepath.Join(t.TempDir(), "run.jsonl")
	r := runCmd(t, bin, nil, "run", "--record", out, "--", py, script, "--steps", "1", "--exit", "3")
	if r.code != 3 {
		t.Errorf("exit %d, want the command's 3\nstderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("no recording after a failing command: %v", err)
	}
	none := filepath.Join(t.TempDir(), "none.jsonl")
	r = runCmd(t, bin, nil, "run", "--record", none, "--", "/nonexistent/python")
	if r.code != 1 || !strings.Contains(r.stderr, "/nonexistent/python") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a missing command: exit %d, stderr %q; want one line", r.code, r.stderr)
	}
	if _, err := os.Stat(none); err == nil {
		t.Errorf("a missing command still started a recording")
	}
}

// signalWhenReady waits for the script's --ready file, then sends sig to
// vramscope (not to the script): vramscope must pass it on.
func signalWhenReady(t *testing.T, ready string, sig os.Signal) func(*os.Process) {
	return func(p *os.Process) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the script never became ready")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := p.Signal(sig); err != nil {
			t.Errorf("signal: %v", err)
		}
	}
}

func TestRunRelaysSignals(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	tests := []struct {
		name   string
		sig    os.Signal
		args   []string
		code   int
		stdout string
	}{
		// The script's SIGTERM handler exits 42: the signal reached it and
		// its own exit code came back.
		{"SIGTERM reaches the handler", syscall.SIGTERM, []string{"--trap"}, 42, "got SIGTERM"},
		// Not from a terminal (no tty here), so SIGINT is passed on: Python's
		// KeyboardInterrupt ends it, and it dies of SIGINT: 128+2.
		{"SIGINT from kill", syscall.SIGINT, nil, 130, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, ready := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "ready")
			args := append([]string{"run", "--record", out, "--", py, script, "--steps", "1000", "--sleep", "0.05", "--ready", ready}, tc.args...)
			r := runCmd(t, bin, signalWhenReady(t, ready, tc.sig), args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.stdout) {
				t.Errorf("stdout %q lacks %q", r.stdout, tc.stdout)
			}
			// vramscope outlived the signal: the recording has the steps
			// done before it and the summary was written.
			if !strings.Contains(r.stderr, "vramscope: 1 client,") {
				t.Errorf("no summary after the signal:\n%s", r.stderr)
			}
			if rep := reportOf(t, bin, out); len(rep.Processes) != 1 || len(rep.Processes[0].Steps) < 1 {
				t.Errorf("recording after %v: %+v", tc.sig, rep.Processes)
			}
		})
	}
}

// TestRunServesPrometheus: `run --prometheus` serves the run's own metrics
// while the command trains (auto-attached, 0.2 s a step).
func TestRunServesPrometheus(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	scraped := make(chan string, 1)
	scrape := func(*os.Process) {
		go func() {
			body := ""
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				resp, err := http.Get("http://" + addr + "/metrics")
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if body = string(b); strings.Contains(body, "vramscope_last_step{") {
					break
				}
			}
			scraped <- body
		}()
	}
	out := filepath.Join(t.TempDir(), "run.jsonl.gz")
	r := runCmd(t, bin, scrape, "run", "--record", out, "--prometheus", addr, "--", py, script, "--steps", "25", "--sleep", "0.2")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "serving Prometheus metrics on http://"+addr+"/metrics") {
		t.Errorf("no serving line in stderr:\n%s", r.stderr)
	}
	body := <-scraped
	if !strings.Contains(body, "vramscope_last_step{") || !strings.Contains(body, "vramscope_step{") {
		t.Errorf("no step metrics while the command trained:\n%s", body)
	}
}
