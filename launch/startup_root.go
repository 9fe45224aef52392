//go:build unix

package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/vramscope/vramscope/internal/safefs"
)

// StartupRoot returns the user's private directory for the startup files,
// created 0700 and checked by its descriptor (others may read it, never
// write it): $XDG_CACHE_HOME/vramscope,
// else ~/.cache/vramscope, when every directory above it belongs to the
// user or to root and no one else can write it (or it is sticky, as /tmp
// is). With no such home (sudo keeping another user's HOME, a container
// without one) it is the per-user directory of the temporary directory,
// /tmp/vramscope-UID, the socket's fallback: 0700, ours, never removed.
func StartupRoot() (string, error) {
	var bases []string
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		bases = append(bases, d)
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		bases = append(bases, filepath.Join(h, ".cache"))
	}
	for _, base := range bases {
		if !trustedChain(base) || os.MkdirAll(base, 0o700) != nil {
			continue
		}
		root := filepath.Join(base, "vramscope")
		if _, err := safefs.PrivateDir(root, 0o055); err == nil && trustedChain(root) {
			return root, nil
		}
	}
	root := filepath.Join(os.TempDir(), "vramscope-"+strconv.Itoa(os.Geteuid()))
	if _, err := safefs.PrivateDir(root, 0); err != nil || !trustedChain(root) {
		return "", fmt.Errorf("no private directory for the startup files (set HOME or XDG_CACHE_HOME to a directory of yours): %v", err)
	}
	return root, nil
}

// trustedChain reports whether every existing directory on the way to dir
// (symlinks resolved) belongs to the user or to root and is writable by no
// one else unless sticky: no other user can then replace or create any
// part of the path.
func trustedChain(dir string) bool {
	p := filepath.Clean(dir)
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
	for {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			return false
		}
		if (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || (st.Mode&0o022 != 0 && st.Mode&syscall.S_ISVTX == 0) {
			return false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return true
		}
		p = parent
	}
}
