//go:build unix

package metrics

import "syscall"

// softFileLimit is the process's soft limit on open descriptors.
func softFileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return uint64(lim.Cur), true
}
