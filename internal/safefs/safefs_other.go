//go:build !unix

package safefs

import (
	"errors"
	"io/fs"
	"os"
)

// OpenFile opens path for writing as how says (no symlink checks here).
func OpenFile(path string, how How, perm fs.FileMode) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE
	switch how {
	case Exclusive:
		flags |= os.O_EXCL
	case Truncate:
		flags |= os.O_TRUNC
	case Append:
		flags |= os.O_APPEND
	}
	return os.OpenFile(path, flags, perm)
}

// PrivateDir creates dir when missing.
func PrivateDir(dir string, tolerated fs.FileMode) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return false, err
}
