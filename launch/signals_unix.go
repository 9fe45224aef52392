//go:build unix

package launch

import (
	"os"
	"syscall"
)

// Relayed are the signals vramscope passes on to the command.
var Relayed = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Stopping reports whether sig asks a process to stop (SIGUSR1 and SIGUSR2,
// which training scripts use for checkpoints, do not).
func Stopping(sig os.Signal) bool { return sig != syscall.SIGUSR1 && sig != syscall.SIGUSR2 }

// ttyKey reports whether a terminal sends sig from a key (Ctrl-C, Ctrl-\).
func ttyKey(sig os.Signal) bool { return sig == syscall.SIGINT || sig == syscall.SIGQUIT }

// killedBy returns the signal that ended the process, if one did.
func killedBy(ps *os.ProcessState) (syscall.Signal, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}
