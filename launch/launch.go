// Package launch runs a training command under vramscope: it writes the
// startup directory that attaches the hook with no code change (a
// sitecustomize.py on PYTHONPATH plus a copy of the hook package), builds
// the child's environment so both sides agree on the socket, starts the
// command, relays signals to it and turns its end into an exit code
// (docs/run.md). It knows nothing of the monitor.
package launch

import (
	"os"
	"strings"
)

// EnvSocket is the variable both sides read for the socket path.
const EnvSocket = "VRAMSCOPE_SOCKET"

// EnvAutoAttach turns auto-attach off in the child when set to "0".
const EnvAutoAttach = "VRAMSCOPE_AUTOATTACH"

// ExitError is a command's end as a process exit code: its own code, or
// 128+N when signal N killed it (the shell's convention).
type ExitError struct {
	// Code is the exit code vramscope itself should exit with.
	Code int
	// Desc says how the command ended, for a log line.
	Desc string
}

func (e *ExitError) Error() string { return e.Desc }

// ChildEnv returns environ with the socket path set, pyPath put first on
// PYTHONPATH (so its sitecustomize runs in every Python process the command
// starts, torchrun's workers included) and auto-attach switched on or off.
// Later entries of environ for the same names are dropped.
func ChildEnv(environ []string, socket, pyPath string, attach bool) []string {
	out := make([]string, 0, len(environ)+3)
	pythonPath := ""
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvSocket, EnvAutoAttach:
			continue
		case "PYTHONPATH":
			pythonPath = v
			continue
		}
		out = append(out, kv)
	}
	if pyPath != "" {
		if pythonPath != "" {
			pythonPath = pyPath + string(os.PathListSeparator) + pythonPath
		} else {
			pythonPath = pyPath
		}
	}
	if pythonPath != "" {
		out = append(out, "PYTHONPATH="+pythonPath)
	}
	on := "1"
	if !attach {
		on = "0"
	}
	return append(out, EnvSocket+"="+socket, EnvAutoAttach+"="+on)
}

// describe is argv for messages: the program and up to three arguments.
func describe(argv []string) string {
	if len(argv) > 4 {
		return strings.Join(argv[:4], " ") + " …"
	}
	return strings.Join(argv, " ")
}

// Describe names a command for the TUI's title and log lines.
func Describe(argv []string) string { return describe(argv) }
