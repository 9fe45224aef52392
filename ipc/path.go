package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
)

// maxSocketPath is the longest path a Unix socket address can carry
// (sun_path is 108 bytes on Linux, 104 on macOS; both need the NUL).
const maxSocketPath = 103

// DefaultSocketPath returns where the monitor listens and the hook connects:
// $VRAMSCOPE_SOCKET when set, else $XDG_RUNTIME_DIR/vramscope/vramscope.sock,
// else /tmp/vramscope-$UID/vramscope.sock.
func DefaultSocketPath() string {
	path, _ := SocketPathFor(os.Getenv, os.Getuid())
	return path
}

// SocketPathFor is DefaultSocketPath for a given environment and uid, with
// the rule that chose the path (for `vramscope doctor`).
func SocketPathFor(getenv func(string) string, uid int) (path, rule string) {
	if p := getenv("VRAMSCOPE_SOCKET"); p != "" {
		return p, "$VRAMSCOPE_SOCKET"
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "vramscope", "vramscope.sock"), "$XDG_RUNTIME_DIR"
	}
	return FallbackSocketPath(uid), "no $VRAMSCOPE_SOCKET or $XDG_RUNTIME_DIR: the /tmp fallback"
}

// FallbackSocketPath is the path used when neither variable is set.
func FallbackSocketPath(uid int) string {
	return filepath.Join("/tmp", "vramscope-"+strconv.Itoa(uid), "vramscope.sock")
}

// prepareDir makes sure the socket's directory exists, is a directory, is
// ours and is closed to group and others. It creates the directory (0700
// whatever the umask), then checks the directory it opened, without
// following a symlink, by its descriptor: a symlink planted between a
// check of the path and a chmod of it had its target's mode changed. A
// directory that already exists with a looser mode is refused, with a
// private directory to use instead, rather than changed behind the user's
// back: it may be shared on purpose (/tmp), and no advice ever suggests
// changing its mode.
func prepareDir(dir, base string) error {
	if parent := filepath.Dir(dir); parent != dir {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return fmt.Errorf("create socket directory %s: %w", parent, err)
		}
	}
	_, err := safefs.PrivateDir(dir, 0)
	var owner *safefs.OwnerError
	var mode *safefs.ModeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &owner):
		return fmt.Errorf("socket directory %s is owned by uid %d, not by you (uid %d); use another path (--socket or VRAMSCOPE_SOCKET)", dir, owner.UID, os.Geteuid())
	case errors.As(err, &mode):
		return fmt.Errorf("socket directory %s has mode %04o: others can open it, and the socket needs a directory only you can open; %s", dir, mode.Mode, PrivateDirAdvice(dir, base, os.Geteuid()))
	case errors.Is(err, safefs.ErrNotDir):
		return fmt.Errorf("socket directory %s is not a directory (a symlink there is not followed)", dir)
	}
	return fmt.Errorf("socket directory %s: %w", dir, err)
}

// PrivateDirAdvice is what to do about a socket directory that others can
// open: leave it as it is (it may be /tmp, which every user needs open) and
// make a private directory inside it for the socket, on both sides.
func PrivateDirAdvice(dir, base string, uid int) string {
	private := PrivateDirFor(dir, uid)
	sock := filepath.Join(private, base)
	return fmt.Sprintf("leave %s as it is and use a private directory: mkdir -m 700 %s, then --socket %s on the monitor and VRAMSCOPE_SOCKET=%s on the training side", dir, private, sock, sock)
}

// PrivateDirFor is the private directory PrivateDirAdvice suggests inside
// dir: vramscope-UID, the name of the /tmp fallback's.
func PrivateDirFor(dir string, uid int) string {
	return filepath.Join(dir, "vramscope-"+strconv.Itoa(uid))
}

// clearStale handles whatever is already at path. Nothing: fine. A socket
// nobody listens on (a crashed monitor's): removed. A socket with a live
// listener: ErrInUse. Anything else: an error, and the file is left alone.
func clearStale(path string, dialTimeout time.Duration) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check socket path %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket (%s); not removing it: delete it yourself or use another path", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, dialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w on %s", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("check existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// dirOf returns the directory that holds path.
func dirOf(path string) string { return filepath.Dir(path) }

// sameFile reports whether path still names the file fi described.
func sameFile(path string, fi fs.FileInfo) bool {
	now, err := os.Lstat(path)
	return err == nil && os.SameFile(now, fi)
}
