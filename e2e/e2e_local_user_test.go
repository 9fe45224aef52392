package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests attack `vramscope run` as another local user would: one that
// can read the names in /tmp and create files wherever the permissions
// let it. They need root (to be the victim and to become the attacker)
// and useradd; CI runs as root.

// attacker returns the name of an unprivileged local user, created for the
// test when missing, or skips saying why it cannot.
func attacker(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the victim is root and the attacker another local user")
	}
	const name = "vsprobe"
	if exec.Command("id", "-u", name).Run() != nil {
		if out, err := exec.Command("useradd", "-M", "-s", "/bin/sh", name).CombinedOutput(); err != nil {
			t.Skipf("cannot create the attacker user %s: %v: %s", name, err, out)
		}
	}
	return name
}

// asUser runs a shell script as user, in /, and returns whether it exited 0.
func asUser(user, script string) bool {
	cmd := exec.Command("runuser", "-u", user, "--", "sh", "-c", script)
	cmd.Dir = "/"
	return cmd.Run() == nil
}

// plantSitecustomize tries, as user, to make every PYTHONPATH entry hold a
// sitecustomize.py that writes marker, and reports the entries it planted.
func plantSitecustomize(t *testing.T, user, pythonPath, marker string) []string {
	var planted []string
	for _, dir := range filepath.SplitList(pythonPath) {
		if dir == "" {
			continue
		}
		script := "mkdir -p '" + dir + "' 2>/dev/null; printf 'open(\"" + marker + "\", \"w\").close()\\n' > '" + dir + "/sitecustomize.py'"
		if asUser(user, script) {
			planted = append(planted, dir)
			if parent := filepath.Dir(dir); strings.HasPrefix(parent, "/tmp/") {
				t.Cleanup(func() { os.RemoveAll(parent) })
			}
		}
	}
	return planted
}

// TestRunSearchPathCannotBeTakenOverByAnotherUser: `run` put a directory
// of /tmp first on the command's PYTHONPATH and removed it at its end (or
// left it to the next run's cleanup after a SIGKILL). A process the command
// left behind keeps the variable, so another user re-created the directory
// with a sitecustomize.py, and the next Python that process started ran it
// as the victim. The search path now names only a directory that no other
// user can create or write, and that is never removed.
func TestRunSearchPathCannotBeTakenOverByAnotherUser(t *testing.T) {
	user := attacker(t)
	bin := binary(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	for _, tc := range []struct{ end, home string }{{"exit", "home"}, {"SIGKILL", "home"}, {"exit", "no home"}, {"SIGKILL", "no home"}} {
		end := tc.end
		t.Run(end+", "+tc.home, func(t *testing.T) {
			work := t.TempDir()
			os.Chmod(work, 0o755)
			seen := filepath.Join(work, "pythonpath")
			marker := filepath.Join(work, "pwned")
			script := "echo \"$PYTHONPATH\" > " + seen + "; "
			if end == "SIGKILL" {
				script += "sleep 60"
			}
			cmd := exec.Command(bin, "run", "--record", filepath.Join(work, "r.jsonl"), "--", "sh", "-c", script)
			cmd.Env = withoutEnv(os.Environ(), "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "HOME", "PYTHONPATH", "VRAMSCOPE_SOCKET")
			if tc.home == "home" {
				cmd.Env = append(cmd.Env, "HOME="+t.TempDir())
			}
			cmd.Dir = work
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			var pythonPath string
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if b, err := os.ReadFile(seen); err == nil && strings.HasSuffix(string(b), "\n") {
					pythonPath = strings.TrimSpace(string(b))
					break
				}
			}
			if pythonPath == "" {
				t.Fatal("the command never wrote its PYTHONPATH")
			}
			if end == "SIGKILL" {
				cmd.Process.Kill()
			}
			cmd.Wait()
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if end == "SIGKILL" { // the next run cleans up what a killed one left
				next := exec.Command(bin, "run", "--record", filepath.Join(work, "next.jsonl"), "--", "true")
				next.Env, next.Dir = cmd.Env, work
				if out, err := next.CombinedOutput(); err != nil {
					t.Fatalf("the next run: %v: %s", err, out)
				}
			}
			os.Chmod(work, 0o777) // the attacker may write the marker, if its code ever runs
			if planted := plantSitecustomize(t, user, pythonPath, marker); len(planted) > 0 {
				t.Errorf("after the run's %s, user %s wrote a sitecustomize.py into %q on the command's PYTHONPATH", end, user, planted)
			}
			py := exec.Command(python, "-c", "pass")
			py.Env = append(withoutEnv(os.Environ(), "PYTHONPATH"), "PYTHONPATH="+pythonPath)
			py.Run()
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a Python started with the command's PYTHONPATH after the run's %s ran user %s's code", end, user)
			}
		})
	}
}

// withoutEnv is environ without the named variables.
func withoutEnv(environ []string, names ...string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
