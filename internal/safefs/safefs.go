//go:build unix

// Package safefs creates the files and directories vramscope writes
// without following what another local user may have planted at their
// names: a symlink, a hard link, a FIFO, a directory of theirs. Each is
// opened first and then checked by its descriptor (owner, type, mode,
// links), never by its path, so nothing can be swapped in between.
package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenFile opens path for writing as how says, with mode perm when it is
// created. It never follows a symlink at path, never blocks on a FIFO
// planted there, and refuses an existing file that is not a regular file
// of the user's with one link (a hard link to someone else's file).
func OpenFile(path string, how How, perm fs.FileMode) (*os.File, error) {
	flags := syscall.O_WRONLY | syscall.O_CREAT | syscall.O_NOFOLLOW | syscall.O_CLOEXEC | syscall.O_NONBLOCK
	switch how {
	case Exclusive:
		flags |= syscall.O_EXCL
	case Append:
		flags |= syscall.O_APPEND
	}
	fd, err := syscall.Open(path, flags, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || (how == Exclusive && errors.Is(err, syscall.EEXIST)) {
			return nil, &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
		}
		if errors.Is(err, syscall.ENXIO) { // a FIFO nobody reads
			return nil, &fs.PathError{Op: "create", Path: path, Err: errors.New("not a regular file")}
		}
		return nil, &fs.PathError{Op: "create", Path: path, Err: err}
	}
	if err := checkFile(fd); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "create", Path: path, Err: err}
	}
	if err := syscall.SetNonblock(fd, false); err == nil && how == Truncate {
		err = syscall.Ftruncate(fd, 0)
	}
	if err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "create", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkFile says why an opened file is not one to write: not a regular
// file, not the user's, or linked from elsewhere too.
func checkFile(fd int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return errors.New("not a regular file")
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("the file belongs to uid %d, not to you (uid %d)", st.Uid, os.Geteuid())
	case st.Nlink > 1:
		return fmt.Errorf("the file has %d hard links; refusing to write through one", st.Nlink)
	}
	return nil
}

// PrivateDir makes sure dir is a directory of the user's that no one else
// can write: it creates dir (0700, whatever the umask) when missing, then
// opens it without following a symlink and checks the opened directory's
// owner and mode. A directory it created is set to 0700 through its
// descriptor. An existing directory whose mode lets others in
// (perm&tolerated != perm&0o077) is refused with ErrOpen, unchanged.
// created says whether it made dir.
func PrivateDir(dir string, tolerated fs.FileMode) (created bool, err error) {
	if err := syscall.Mkdir(dir, 0o700); err == nil {
		created = true
	} else if !errors.Is(err, syscall.EEXIST) {
		return false, &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			return created, &fs.PathError{Op: "open", Path: dir, Err: ErrNotDir}
		}
		return created, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return created, &fs.PathError{Op: "stat", Path: dir, Err: err}
	}
	if int(st.Uid) != os.Geteuid() {
		return created, &OwnerError{Dir: dir, UID: int(st.Uid)}
	}
	if created {
		if err := syscall.Fchmod(fd, 0o700); err != nil {
			return created, &fs.PathError{Op: "chmod", Path: dir, Err: err}
		}
		return created, nil
	}
	if perm := fs.FileMode(st.Mode) & 0o077; perm&^tolerated != 0 {
		return created, &ModeError{Dir: dir, Mode: uint32(st.Mode) & 0o7777}
	}
	return created, nil
}
