//go:build linux

package launch

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Foreground reports whether vramscope's process group is the foreground
// group of the terminal on stdin: then a Ctrl-C at that terminal signals
// the child directly, as it shares the group.
func Foreground() bool {
	pgrp, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}
