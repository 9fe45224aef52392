//go:build unix

package ipc

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestDefaultSocketPath(t *testing.T) {
	t.Setenv("VRAMSCOPE_SOCKET", "/x/y.sock")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/7")
	if got := DefaultSocketPath(); got != "/x/y.sock" {
		t.Errorf("with VRAMSCOPE_SOCKET: %q", got)
	}
	t.Setenv("VRAMSCOPE_SOCKET", "")
	if got := DefaultSocketPath(); got != "/run/user/7/vramscope/vramscope.sock" {
		t.Errorf("with XDG_RUNTIME_DIR: %q", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	want := "/tmp/vramscope-" + strconv.Itoa(os.Getuid()) + "/vramscope.sock"
	if got := DefaultSocketPath(); got != want {
		t.Errorf("with neither: %q, want %q", got, want)
	}
}

func TestListenUsesEnvironment(t *testing.T) {
	path := filepath.Join(shortDir(t), "env.sock")
	t.Setenv("VRAMSCOPE_SOCKET", path)
	s, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path %q, want %q", s.Path(), path)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("no socket at %s: %v", path, err)
	}
}

func TestListenPermissions(t *testing.T) {
	old := syscall.Umask(0) // the modes must not depend on the umask
	defer syscall.Umask(old)
	dir := filepath.Join(shortDir(t), "new", "sub")
	path := filepath.Join(dir, "s.sock")
	s, err := Listen(WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("directory mode %04o, want 0700", got)
	}
	fi, err = os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
}

func TestListenRefusesOpenDirectory(t *testing.T) {
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(WithSocketPath(filepath.Join(dir, "s.sock")))
	// Never advise changing the directory's mode (it may be /tmp).
	private := filepath.Join(dir, "vramscope-"+strconv.Itoa(os.Geteuid()))
	if err == nil || strings.Contains(err.Error(), "chmod") || !strings.Contains(err.Error(), "mkdir -m 700 "+private) ||
		!strings.Contains(err.Error(), "VRAMSCOPE_SOCKET="+filepath.Join(private, "s.sock")) {
		t.Fatalf("got %v, want a refusal that names a private directory and no chmod", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("Listen changed the mode of an existing directory to %v", fi.Mode())
	}
}

// A 1777 directory was reported as "mode 0777".
func TestListenReportsTheStickyBit(t *testing.T) {
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(WithSocketPath(filepath.Join(dir, "s.sock")))
	if err == nil || !strings.Contains(err.Error(), "has mode 1777") || strings.Contains(err.Error(), "chmod") {
		t.Fatalf("got %v, want the mode as chmod writes it, and no chmod advice", err)
	}
}

func TestListenRefusesForeignDirectory(t *testing.T) {
	dir := shortDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		dir = "/" // owned by root, never by a test user
	}
	_, err := Listen(WithSocketPath(filepath.Join(dir, "s.sock")))
	if err == nil || !strings.Contains(err.Error(), "is owned by uid") {
		t.Fatalf("got %v, want a refusal naming the owner", err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // a crashed monitor: the file stays, nobody listens
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not in place: %v", err)
	}
	s, err := Listen(WithSocketPath(path))
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer s.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	c.Close()
}

func TestListenLiveSocketInUse(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	first, err := Listen(WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = Listen(WithSocketPath(path))
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("got %v, want ErrInUse", err)
	}
	if want := "another vramscope is listening on " + path; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first server's socket is gone: %v", err)
	}
	c.Close()
}

func TestListenKeepsNonSocketFile(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(WithSocketPath(path))
	if err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("got %v, want a not-a-socket error", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Errorf("file changed or removed: %q %v", b, err)
	}
}

func TestListenPathTooLong(t *testing.T) {
	path := "/tmp/" + strings.Repeat("d", 120) + "/s.sock"
	_, err := Listen(WithSocketPath(path))
	if err == nil || !strings.Contains(err.Error(), "the limit is") {
		t.Fatalf("got %v, want a path length error", err)
	}
}

func TestCloseRemovesOnlyOwnSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	s, err := Listen(WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close left the socket file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	s, err = Listen(WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	// Someone replaced the file after we listened: Close must not delete it.
	os.Remove(path)
	if err := os.WriteFile(path, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if b, err := os.ReadFile(path); err != nil || string(b) != "theirs" {
		t.Errorf("Close removed a file that was not its own: %q %v", b, err)
	}
}

// A symlink at the socket directory's name is refused, not followed: the
// directory is checked by the descriptor that opened it, never by a path
// that can be swapped in between.
func TestListenRefusesASymlinkedDirectory(t *testing.T) {
	base := shortDir(t)
	target := filepath.Join(base, "elsewhere")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "sockdir")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s, err := Listen(WithSocketPath(filepath.Join(link, "s.sock")))
	if err == nil {
		s.Close()
		t.Fatal("Listen went through a symlinked socket directory")
	}
	if _, err := os.Lstat(filepath.Join(target, "s.sock")); err == nil {
		t.Error("a socket was made in the symlink's target")
	}
}

// The socket directory was created by Stat, MkdirAll, then Chmod of the
// path: a symlink planted between the first two had its target's mode set
// to 0700. A neighbour flips the name between nothing and a symlink to a
// 0755 directory while the monitor prepares it; the target keeps its mode.
func TestListenNeverChmodsAPlantedTarget(t *testing.T) {
	base := shortDir(t)
	target := filepath.Join(base, "victim")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(target, 0o755)
	dir := filepath.Join(base, "sockdir")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Symlink(target, dir)
			os.Remove(dir)
		}
	}()
	for i := 0; i < 3000; i++ {
		if s, err := Listen(WithSocketPath(filepath.Join(dir, "s.sock"))); err == nil {
			s.Close()
		}
		os.Remove(dir) // a real directory the monitor made, to race again
		if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
			close(stop)
			<-done
			t.Fatalf("after %d tries the planted target's mode is %v", i+1, fi.Mode().Perm())
		}
	}
	close(stop)
	<-done
}
