//go:build linux

package launch

import (
	"os"
	"syscall"
	"unsafe"
)

// Foreground reports whether vramscope's process group is the foreground
// group of the terminal on stdin: then a Ctrl-C at that terminal signals
// the child directly, as it shares the group.
func Foreground() bool {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return errno == 0 && int(pgrp) == syscall.Getpgrp()
}
