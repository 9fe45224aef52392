package doctor

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

	"github.com/vramscope/vramscope/ipc"
)

// DefaultPath returns the socket path and the rule that chose it, as the
// monitor (ipc.SocketPathFor) and the hook's default_socket_path compute it.
func DefaultPath(getenv func(string) string, uid int) (path, rule string) {
	return ipc.SocketPathFor(getenv, uid)
}

// listenState is what is at a socket path.
type listenState int

const (
	nothing   listenState = iota // no file
	listening                    // a live listener answered
	stale                        // a socket file nobody listens on
	notSocket                    // some other file
	unknown                      // could not tell (permission, …)
)

func probe(path string) (listenState, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nothing, nil, nil
	}
	if err != nil {
		return unknown, nil, err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return notSocket, fi, nil
	}
	c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err == nil {
		c.Close() // the monitor sees a connection without hello, as from its own stale check
		return listening, fi, nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return stale, fi, nil
	}
	return unknown, fi, err
}

func describeFile(fi fs.FileInfo, uid int) string {
	s := fi.Mode().String()
	if o, ok := owner(fi); ok {
		who := "you"
		if o != uid {
			who = "not you"
		}
		s += fmt.Sprintf(" uid %d (%s)", o, who)
	}
	return s
}

// checkMonitor checks the monitor's side: the path, its directory, the
// socket and the paths a job started elsewhere would use.
func checkMonitor(o Options) (string, Section) {
	sec := Section{Title: "monitor side (this shell's environment)"}
	path, rule := o.Socket, "--socket"
	if path == "" {
		path, rule = DefaultPath(o.Getenv, o.UID)
	}
	sec.add(Info, "socket path", fmt.Sprintf("%s (%s)", path, rule), "")
	dir := filepath.Dir(path)
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		sec.add(Info, "directory", dir+" does not exist yet; the monitor creates it with mode 0700", "")
	case err != nil:
		sec.add(Fail, "directory", fmt.Sprintf("%s: %v", dir, err), "use a path you can reach: --socket on the monitor and VRAMSCOPE_SOCKET in the training job")
	case !fi.IsDir():
		sec.add(Fail, "directory", dir+" is not a directory", "use another path: --socket / VRAMSCOPE_SOCKET")
	default:
		desc := dir + " " + describeFile(fi, o.UID)
		if u, ok := owner(fi); ok && u != o.UID {
			sec.add(Fail, "directory", desc, "the monitor refuses a directory owned by someone else: use another path (--socket / VRAMSCOPE_SOCKET)")
		} else if fi.Mode().Perm()&0o077 != 0 {
			sec.add(Fail, "directory", desc, fmt.Sprintf("the monitor refuses a directory others can open; %s", ipc.PrivateDirAdvice(dir, filepath.Base(path), o.UID)))
		} else {
			sec.add(OK, "directory", desc, "")
		}
	}
	state, fi, err := probe(path)
	switch state {
	case listening:
		sec.add(OK, "monitor", "listening on "+path+" (socket "+describeFile(fi, o.UID)+")", "")
	case nothing:
		sec.add(Warn, "monitor", "none: nothing at "+path, "start one: vramscope (live), vramscope record -o FILE, or vramscope run -- python train.py")
	case stale:
		sec.add(Warn, "monitor", "none: "+path+" is a socket nobody listens on (a monitor that crashed or was killed)", "harmless: the next monitor removes it; start one: vramscope")
	case notSocket:
		sec.add(Fail, "monitor", path+" exists and is not a socket ("+fi.Mode().String()+")", "remove it or use another path (--socket / VRAMSCOPE_SOCKET)")
	default:
		sec.add(Fail, "monitor", fmt.Sprintf("cannot tell what is at %s: %v", path, err), "check the path's permissions, or use another path")
	}
	checkElsewhere(&sec, o, path, state == listening)
	return path, sec
}

// checkElsewhere looks at the paths a process with another environment
// would use (an SSH shell has XDG_RUNTIME_DIR; nohup under sudo, sbatch,
// docker exec and systemd jobs often do not), and says when a monitor
// listens on one of them instead.
func checkElsewhere(sec *Section, o Options, path string, here bool) {
	seen := map[string]bool{path: true}
	candidates := o.Elsewhere
	if candidates == nil {
		candidates = []string{
			ipc.FallbackSocketPath(o.UID),
			filepath.Join("/run/user", strconv.Itoa(o.UID), "vramscope", "vramscope.sock"),
		}
	}
	var others []string
	for _, p := range candidates {
		if !seen[p] {
			seen[p] = true
			others = append(others, p)
		}
	}
	for _, p := range others {
		if state, _, _ := probe(p); state == listening {
			fix := fmt.Sprintf("a process whose environment differs from this shell's uses that path: run the training with VRAMSCOPE_SOCKET=%s, or start the monitor with --socket %s", p, path)
			if here {
				sec.add(Info, "also", "a monitor listens on "+p+" too", "")
				continue
			}
			sec.add(Warn, "elsewhere", "a monitor listens on "+p+", not on this shell's path", fix)
		}
	}
	if o.Getenv("VRAMSCOPE_SOCKET") == "" {
		sec.add(Info, "tip", "jobs started by sbatch, nohup under sudo, docker exec or systemd may lack XDG_RUNTIME_DIR and use another path", "set VRAMSCOPE_SOCKET to one path on both sides, or use: vramscope run -- python train.py")
	}
}
