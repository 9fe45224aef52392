//go:build unix

package safefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO planted at an output's name made the open wait forever for a
// reader; it is refused at once.
func TestOpenFileRefusesAFIFOAtOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := OpenFile(p, Truncate, 0o600)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO was opened for writing")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OpenFile waited on a FIFO")
	}
}

func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(base, "new")
	if created, err := PrivateDir(dir, 0); err != nil || !created {
		t.Fatalf("PrivateDir(new) = %v, %v", created, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("created %v, want 0700 whatever the umask", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o755)
	var me *ModeError
	if _, err := PrivateDir(open, 0); !errors.As(err, &me) || me.Mode != 0o755 {
		t.Errorf("an open directory: %v", err)
	}
	if _, err := PrivateDir(open, 0o055); err != nil {
		t.Errorf("an open directory with group and others' read tolerated: %v", err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o755 {
		t.Errorf("an existing directory's mode was changed to %v", fi.Mode().Perm())
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := PrivateDir(file, 0); !errors.Is(err, ErrNotDir) {
		t.Errorf("a file: %v", err)
	}
	link := filepath.Join(base, "link")
	os.Symlink(dir, link)
	if _, err := PrivateDir(link, 0); !errors.Is(err, ErrNotDir) {
		t.Errorf("a symlink to a private directory: %v", err)
	}
	f, err := OpenFile(filepath.Join(base, "f"), Exclusive, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := OpenFile(filepath.Join(base, "f"), Exclusive, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Exclusive over an existing file: %v", err)
	}
}
