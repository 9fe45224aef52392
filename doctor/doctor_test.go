package doctor

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func find(t *testing.T, r Report, what string) Finding {
	t.Helper()
	for _, s := range r.Sections {
		for _, f := range s.Findings {
			if f.What == what {
				return f
			}
		}
	}
	t.Fatalf("no %q finding in %+v", what, r)
	return Finding{}
}

func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func TestMonitorSide(t *testing.T) {
	uid := os.Getuid()
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string) // dir: the socket's directory
		what   string
		level  Level
		text   string
		failed bool
	}{
		{"a listening monitor", func(t *testing.T, dir string) { listen(t, filepath.Join(dir, "s.sock")) },
			"monitor", OK, "listening on", false},
		{"no monitor", func(*testing.T, string) {}, "monitor", Warn, "nothing at", false},
		{"a stale socket", func(t *testing.T, dir string) {
			l, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}, "monitor", Warn, "nobody listens", false},
		{"a file in the way", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "s.sock"), nil, 0o600)
		}, "monitor", Fail, "is not a socket", true},
		{"a directory others can open", func(t *testing.T, dir string) { os.Chmod(dir, 0o755) },
			"directory", Fail, "drwxr-xr-x", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			sock := filepath.Join(dir, "s.sock")
			r := Run(context.Background(), Options{Getenv: env(map[string]string{"VRAMSCOPE_SOCKET": sock}), UID: uid, Elsewhere: []string{}})
			f := find(t, r, tc.what)
			if f.Level != tc.level || !strings.Contains(f.Text, tc.text) {
				t.Errorf("%s: got %v %q, want %v containing %q", tc.what, f.Level, f.Text, tc.level, tc.text)
			}
			if r.Failed() != tc.failed {
				t.Errorf("Failed() = %v", r.Failed())
			}
			if tc.level == Fail && f.Fix == "" {
				t.Errorf("a failure without a fix: %+v", f)
			}
			if tc.name == "a directory others can open" && (strings.Contains(f.Fix, "chmod") || !strings.Contains(f.Fix, "mkdir -m 700 "+filepath.Join(dir, "vramscope-"+strconv.Itoa(uid)))) {
				t.Errorf("fix %q does not name a private directory, or advises a chmod", f.Fix)
			}
		})
	}
}

// The case: the training job's environment differs from the
// shell's, and the monitor listens where the job's hook connects.
func TestMonitorListeningOnAnotherPath(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	mine, theirs := filepath.Join(dir, "xdg.sock"), filepath.Join(dir, "tmp.sock")
	listen(t, theirs)
	r := Run(context.Background(), Options{Getenv: env(map[string]string{"VRAMSCOPE_SOCKET": mine}), UID: os.Getuid(), Elsewhere: []string{theirs}})
	f := find(t, r, "elsewhere")
	if f.Level != Warn || !strings.Contains(f.Text, theirs) || !strings.Contains(f.Fix, "VRAMSCOPE_SOCKET="+theirs) {
		t.Errorf("elsewhere: %+v", f)
	}
	var b bytes.Buffer
	// Not "✓" right under "! monitor none": the verdict points at
	// the ! lines.
	if err := r.Write(&b); err != nil || !strings.Contains(b.String(), "verdict: ! nothing above blocks the hook's messages, but see the ! monitor and elsewhere lines") {
		t.Errorf("Write: %v\n%s", err, b.String())
	}
}

func TestDefaultPathMatchesTheHookRules(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"VRAMSCOPE_SOCKET": "/x/s.sock", "XDG_RUNTIME_DIR": "/run/user/7"}, "/x/s.sock"},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/7"}, "/run/user/7/vramscope/vramscope.sock"},
		{map[string]string{}, "/tmp/vramscope-7/vramscope.sock"},
	}
	for _, tc := range tests {
		if got, _ := DefaultPath(env(tc.env), 7); got != tc.want {
			t.Errorf("DefaultPath(%v) = %s, want %s", tc.env, got, tc.want)
		}
	}
}

func TestAMissingPythonFails(t *testing.T) {
	r := Run(context.Background(), Options{Getenv: env(map[string]string{"VRAMSCOPE_SOCKET": filepath.Join(t.TempDir(), "s")}),
		UID: os.Getuid(), Python: "/nonexistent/python3", Elsewhere: []string{}})
	if f := find(t, r, "python"); f.Level != Fail || !strings.Contains(f.Fix, "--python") {
		t.Errorf("python: %+v", f)
	}
}
