package safefs

import "io/fs"

// How says what OpenFile does with a file that already exists.
type How int

const (
	// Exclusive creates a new file; an existing file, or a symlink at the
	// name, is an error that wraps fs.ErrExist.
	Exclusive How = iota
	// Truncate creates the file, or empties one of the user's own.
	Truncate
	// Append creates the file, or appends to one of the user's own.
	Append
)

// WriteFile writes data to a new file at path (Exclusive), closing it.
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
