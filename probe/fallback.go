package probe

import (
	"errors"
	"fmt"
)

// UnavailableError says that a sampler cannot be opened on this machine for
// an expected reason (no library, no driver, no permission): the program goes
// on without it. Other errors from an opener are real failures.
type UnavailableError struct {
	// Reason is one short line: "library not found", "no driver", ...
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

// Error returns "NVML unavailable: <reason>".
func (e *UnavailableError) Error() string { return UnavailablePrefix + e.Reason }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable returns the reason of the first UnavailableError in err's
// chain, and whether there is one.
func Unavailable(err error) (reason string, ok bool) {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Reason, true
	}
	return "", false
}

// Open calls open and returns its sampler, or, when open fails or panics, a
// Null sampler whose Status gives the reason in one line. It never panics and
// never returns nil.
func Open(open func() (Sampler, error)) (s Sampler) {
	if open == nil {
		return Null("no sampler configured")
	}
	defer func() {
		if r := recover(); r != nil {
			s = Null(fmt.Sprintf("sampler panicked: %v", r))
		}
	}()
	s, err := open()
	switch {
	case err != nil:
		if s != nil {
			_ = s.Close()
		}
		if reason, ok := Unavailable(err); ok {
			return Null(reason)
		}
		return Null(err.Error())
	case s == nil:
		return Null("sampler missing")
	}
	return s
}
