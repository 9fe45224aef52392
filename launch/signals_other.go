//go:build !unix

package launch

import (
	"os"
	"syscall"
)

// Relayed are the signals vramscope passes on to the command.
var Relayed = []os.Signal{os.Interrupt}

// Stopping reports whether sig asks a process to stop.
func Stopping(os.Signal) bool { return true }

func ttyKey(os.Signal) bool { return false }

func killedBy(*os.ProcessState) (syscall.Signal, bool) { return 0, false }
