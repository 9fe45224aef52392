//go:build linux

package ipc

import (
	"net"
	"syscall"
	"unsafe"
)

// POLLRDHUP (the peer closed its end or shut down writing) and POLLHUP.
const (
	pollRDHUP = 0x2000
	pollHUP   = 0x10
)

// peerGone reports whether the process at the other end of c has closed
// its end: what it sent may still wait in our buffer, but it will send
// nothing more. It asks the kernel (ppoll for POLLRDHUP with a zero
// timeout) and never reads.
func peerGone(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	raw.Control(func(fd uintptr) {
		pfd := struct {
			fd             int32
			events, revent int16
		}{fd: int32(fd), events: pollRDHUP}
		var ts syscall.Timespec
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		gone = errno == 0 && n == 1 && pfd.revent&(pollRDHUP|pollHUP) != 0
	})
	return gone
}
