// Package tinyfs gives tests a real, tiny filesystem to fill: a tmpfs of a
// few KiB mounted for the test, so a full disk is the kernel's ENOSPC and
// not a fake. It needs root and mount(2); tests skip without them.
package tinyfs

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a fresh directory, unmounted at the
// test's end, or skips the test saying why it cannot.
func Mount(t testing.TB, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a tiny tmpfs needs root to mount; the failing-writer tests cover the logic")
	}
	dir, err := os.MkdirTemp("", "vs-tinyfs-")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a tmpfs here (%v: %s); the failing-writer tests cover the logic", err, out)
	}
	t.Cleanup(func() {
		exec.Command("umount", dir).Run()
		os.Remove(dir)
	})
	return dir
}
