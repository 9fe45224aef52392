package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `vramscope doctor` as the real binary, against a real monitor (`vramscope
// record`) and the real Python with torch.

func startRecorder(t *testing.T, bin, sock string) {
	t.Helper()
	cmd := exec.Command(bin, "record", "-o", filepath.Join(t.TempDir(), "r.jsonl"), "--socket", sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorder never listened")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func doctorRun(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"doctor"}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// baseEnv is the test's environment without vramscope's variables.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VRAMSCOPE_") && !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	return env
}

func TestDoctorOnAWorkingSetup(t *testing.T) {
	bin, py := binary(t), torchPython(t)
	dir, err := os.MkdirTemp("", "vsdoc") // short and 0700, like the monitor wants
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "m.sock")
	startRecorder(t, bin, sock)
	pyhook, _ := filepath.Abs("pyhook")
	env := append(baseEnv(), "VRAMSCOPE_SOCKET="+sock, "PYTHONPATH="+pyhook)
	code, out := doctorRun(t, bin, env, "--python", py)
	if code != 0 {
		t.Fatalf("exit %d on a working setup:\n%s", code, out)
	}
	for _, want := range []string{"✓ directory", "✓ monitor      listening on " + sock, "✓ vramscope    hook ", "protocol v1",
		"✓ socket path  the same as the monitor's", "✓ torch", "verdict: ✓"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Without a GPU it says what a CPU run will still show.
	if strings.Contains(out, "is_available() is False") && !strings.Contains(out, "CPU runs still work: the hook reads the process's host memory (RSS") {
		t.Errorf("doctor on a machine without CUDA does not say CPU runs show host RSS:\n%s", out)
	}
}

func TestDoctorOnABrokenSetup(t *testing.T) {
	bin, py := binary(t), torchPython(t)
	dir, err := os.MkdirTemp("", "vsdoc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "m.sock")
	startRecorder(t, bin, sock)
	// The monitor listens on --socket; the training shell has no
	// VRAMSCOPE_SOCKET, so its hook would connect to the default path.
	pyhook, _ := filepath.Abs("pyhook")
	code, out := doctorRun(t, bin, append(baseEnv(), "PYTHONPATH="+pyhook), "--socket", sock, "--python", py)
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"✗ socket path  the hook would connect to ", "set VRAMSCOPE_SOCKET=" + sock, "verdict: ✗"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A socket directory others can open: the monitor would refuse it.
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	code, out = doctorRun(t, bin, append(baseEnv(), "VRAMSCOPE_SOCKET="+filepath.Join(open, "s.sock")), "--python", "")
	if code != 1 || strings.Contains(out, "chmod") || !strings.Contains(out, "mkdir -m 700 "+filepath.Join(open, "vramscope-")) {
		t.Errorf("exit %d, want 1 with a private directory to use, no chmod:\n%s", code, out)
	}
}

func TestVersionCommandAndFlagAgree(t *testing.T) {
	bin := binary(t)
	cmd, _ := runBin(t, bin, "version")
	flag, _ := runBin(t, bin, "--version")
	if cmd != flag {
		t.Errorf("version and --version differ:\n%s\n---\n%s", cmd, flag)
	}
	for _, want := range []string{"vramscope ", "\nrevision: ", "\ngo: go1.", "\nnvml: built in (cgo)", "\nprotocol: v1\n"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("version lacks %q:\n%s", want, cmd)
		}
	}
}
