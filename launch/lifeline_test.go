//go:build unix

package launch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestChildLearnsItsMonitorDied: a SIGKILL of `vramscope run` left the
// child training, unmonitored and without a word.
// The child's sitecustomize watches the lifeline pipe; when the monitor's
// end closes (the kernel closes it at any death, SIGKILL included; here
// the test closes it) the child says so once and goes on to the end of
// its work. A grandchild with the variable but not the pipe says nothing.
func TestChildLearnsItsMonitorDied(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	if err := WriteStartup(dir, nil); err != nil {
		t.Fatal(err)
	}
	life, err := NewLifeline()
	if err != nil {
		t.Fatal(err)
	}
	defer life.Close()
	var stderr, stdout lockedBuffer
	script := `import os, subprocess, sys, time
subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], env=dict(os.environ, VRAMSCOPE_LIFELINE=sys.argv[1]))
time.sleep(1.5)
print("trained")`
	env := append(ChildEnv(os.Environ(), filepath.Join(dir, "none.sock"), dir, false), life.Env())
	c, err := Start(Spec{Argv: []string{py, "-c", script, strings.TrimPrefix(life.Env(), EnvLifeline+"=")}, Env: env,
		Stdout: &stdout, Stderr: &stderr, ExtraFiles: []*os.File{life.ChildEnd()}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if s := stderr.String(); s != "" {
		t.Fatalf("the child spoke while its monitor lived: %q", s)
	}
	life.Close() // as the kernel does when the monitor dies
	if err := c.Wait(); err != nil {
		t.Fatalf("the child did not finish its work: %v", err)
	}
	want := "vramscope: the monitor (vramscope run) is gone; training goes on, unmonitored\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr = %q, want once %q", got, want)
	}
	if stdout.String() != "trained\n" {
		t.Errorf("stdout = %q", stdout.String())
	}
}

// TestStaleRunDirsAreCleaned: a killed run's /tmp/vramscope-run-* with its
// stale socket stayed for good. Private directories
// now live under $XDG_RUNTIME_DIR, carry the run's pid, and the next run
// removes those whose run is gone, and only those.
func TestStaleRunDirsAreCleaned(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	deadPid := dead.ProcessState.Pid()
	mk := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "vramscope.sock"), nil, 0o600)
		os.WriteFile(filepath.Join(p, liveLock), nil, 0o600) // nobody holds it
		return p
	}
	stale := mk("vramscope-run-" + strconv.Itoa(deadPid) + "-123")
	other := mk("vramscope-runner")
	live := filepath.Join(base, "vramscope-run-1-456") // locking still
	os.Mkdir(live, 0o700)
	dir, remove, err := PrivateDir()
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if filepath.Dir(dir) != base || !strings.HasPrefix(filepath.Base(dir), "vramscope-run-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("private dir %s, want vramscope-run-%d-* under $XDG_RUNTIME_DIR", dir, os.Getpid())
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("private dir mode %v (%v)", fi.Mode(), err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the dead run's directory is still there (%v)", err)
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if n := CleanStale(base); n != 0 {
		t.Errorf("a second clean removed %d, among them our own live directory?", n)
	}
}

// TestALiveRunInAnotherPIDNamespaceKeepsItsDirectory: the cleanup asked
// kill(pid, 0) about the pid in a directory's name, in its own PID
// namespace, and removed the live directory of a run inside `unshare
// --pid` that shared /tmp. A live run is now the holder of the flock on
// its directory's lock file, seen from any namespace: here the test holds
// it under a pid that is nobody's in this namespace.
func TestALiveRunInAnotherPIDNamespaceKeepsItsDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "vramscope-run-4194304999-1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "live.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if n := CleanStale(base); n != 0 {
		t.Fatalf("CleanStale removed %d: a live run's directory went", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "live.lock")); err != nil {
		t.Fatalf("the live run's directory is gone: %v", err)
	}
	lock.Close() // the run ends without cleaning up, as SIGKILL leaves it
	if n := CleanStale(base); n != 1 {
		t.Errorf("once its lock was released, CleanStale removed %d, want 1", n)
	}
}
