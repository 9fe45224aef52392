//go:build !unix

package safefs

import (
	"errors"
	"io/fs"
	"os"
)

// How says what OpenFile does with a file that already exists.
type How int

const (
	// Exclusive creates a new file; an existing one is an error.
	Exclusive How = iota
	// Truncate creates the file or empties it.
	Truncate
	// Append creates the file or appends to it.
	Append
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

// WriteFile writes data to a new file at path.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := OpenFile(path, Exclusive, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
