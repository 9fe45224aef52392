//go:build !linux

package launch

// Foreground reports false where it cannot tell: signals are passed on.
func Foreground() bool { return false }
