package safefs

import (
	"errors"
	"fmt"
	"os"
)

// ErrNotDir is PrivateDir's error for a name that is not a directory (a
// symlink included).
var ErrNotDir = errors.New("not a directory (a symlink is not followed)")

// OwnerError is PrivateDir's error for a directory someone else owns.
type OwnerError struct {
	Dir string
	UID int
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("directory %s is owned by uid %d, not by you (uid %d)", e.Dir, e.UID, os.Geteuid())
}

// ModeError is PrivateDir's error for a directory others can get into.
type ModeError struct {
	Dir  string
	Mode uint32 // as chmod writes it
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("directory %s has mode %04o", e.Dir, e.Mode)
}
