//go:build unix

package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
)

// EnvLifeline names the pipe a child under `vramscope run` watches for its
// monitor's death: "FD:INODE", the descriptor the child inherits and the
// pipe's inode, so that a grandchild that got some other file at that
// number (torchrun's workers do not inherit it) ignores it.
const EnvLifeline = "VRAMSCOPE_LIFELINE"

// lifelineFD is the descriptor the child sees the pipe at: ExtraFiles[0].
const lifelineFD = 3

// Lifeline is the write end of a pipe whose read end the child holds. The
// monitor keeps it open while it lives; when it dies, SIGKILL included,
// the kernel closes it, the child's read sees the end of the pipe, and its
// sitecustomize says once, on stderr, that training goes on unmonitored.
// A SIGKILL of `vramscope run` left the child training unmonitored without
// a word.
type Lifeline struct {
	r, w  *os.File
	inode uint64
}

// NewLifeline makes the pipe.
func NewLifeline() (*Lifeline, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the lifeline pipe: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("stat the lifeline pipe: %w", err)
	}
	return &Lifeline{r: r, w: w, inode: uint64(st.Ino)}, nil
}

// Env is the child's EnvLifeline entry.
func (l *Lifeline) Env() string {
	return EnvLifeline + "=" + strconv.Itoa(lifelineFD) + ":" + strconv.FormatUint(l.inode, 10)
}

// ChildEnd is the read end, for Spec.ExtraFiles. The parent's copy does
// not keep the pipe alive: only write ends do.
func (l *Lifeline) ChildEnd() *os.File { return l.r }

// Close closes the write end: the child learns the monitor is gone. The
// monitor closes it when it ends normally too, after the child has
// exited, so a child still running then (a detached grandchild) is told.
func (l *Lifeline) Close() {
	l.r.Close()
	l.w.Close()
}

// runDirPrefix starts the name of every private directory of `vramscope
// run`; the pid of the run that made it follows.
const runDirPrefix = "vramscope-run-"

// liveLock is the file in a run's directory that the run holds an flock on
// while it lives. The kernel drops the lock when the run dies, SIGKILL
// included, and the lock is seen from every PID namespace that shares the
// directory, where kill(pid, 0) asks about some other process or none: a
// run inside `unshare --pid` had its live directory removed.
const liveLock = "live.lock"

// PrivateDir makes `vramscope run`'s private directory (0700: the socket)
// under $XDG_RUNTIME_DIR, which the system reaps at logout and reboot,
// else under the temporary directory, and holds its live lock until
// remove is called, which removes the directory. What killed runs left
// behind is removed first (CleanStale).
func PrivateDir() (dir string, remove func(), err error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if fi, err := os.Stat(base); base == "" || err != nil || !fi.IsDir() || !ownedBy(fi, os.Getuid()) {
		base = os.TempDir()
	}
	CleanStale(base)
	dir, err = os.MkdirTemp(base, runDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", nil, fmt.Errorf("make the run's directory: %w", err)
	}
	lock, err := safefs.OpenFile(filepath.Join(dir, liveLock), safefs.Exclusive, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("lock the run's directory: %w", err)
	}
	return dir, func() {
		os.RemoveAll(dir)
		lock.Close()
	}, nil
}

// CleanStale removes, under base, the private directories of runs that are
// gone: ours (same uid) only, named by PrivateDir, and never one whose
// live lock is held. A directory without the lock file is left alone for
// an hour (a run between making it and locking it). It returns how many
// it removed.
func CleanStale(base string) int {
	ents, err := os.ReadDir(base)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, runDirPrefix) {
			continue
		}
		path := filepath.Join(base, name)
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() || !ownedBy(fi, os.Getuid()) {
			continue
		}
		if removeIfGone(path, fi) {
			n++
		}
	}
	return n
}

// removeIfGone removes a run's directory when no live run holds its lock,
// holding the lock itself meanwhile so no run can take it over.
func removeIfGone(path string, fi os.FileInfo) bool {
	fd, err := syscall.Open(filepath.Join(path, liveLock), syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) || time.Since(fi.ModTime()) < time.Hour {
			return false
		}
		return os.RemoveAll(path) == nil
	}
	defer syscall.Close(fd)
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // a live run holds it, in whatever PID namespace
	}
	return os.RemoveAll(path) == nil
}

func ownedBy(fi os.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
