package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputFilesFollowRecordsPolicy: export -o and plot -o followed a
// planted symlink and truncated its target, and created their files 0644
// under the usual umask though they carry host names and argv. Like record,
// they now refuse an existing file or symlink
// unless --force, and create 0600; --force replaces the link itself,
// never what it points at.
func TestOutputFilesFollowRecordsPolicy(t *testing.T) {
	const rec = "testdata/h100/s001.jsonl.gz"
	for _, kind := range []string{"export", "plot"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			run := func(out string, force bool) error {
				var stdout, stderr bytes.Buffer
				if kind == "export" {
					return runExport(rec, "csv", out, force, &stdout, &stderr)
				}
				return runPlot(rec, out, "", plotOptsDefault(), force, &stdout, &stderr)
			}
			name := "out.csv"
			if kind == "plot" {
				name = "out.svg"
			}
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, name)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			err := run(link, false)
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--force") {
				t.Errorf("a planted symlink: %v", err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious" {
				t.Fatalf("the symlink's target was written: %q", b)
			}
			if err := run(link, true); err != nil {
				t.Fatalf("--force over a symlink: %v", err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious" {
				t.Errorf("--force wrote through the symlink: %q", b)
			}
			fi, err := os.Lstat(link)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Errorf("--force left %v (%v), want a regular file 0600", fi.Mode(), err)
			}
			if err := run(link, false); err == nil {
				t.Error("an existing file was replaced without --force")
			}
			fresh := filepath.Join(dir, "fresh-"+name)
			if err := run(fresh, false); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("a new output file is %v (%v), want 0600", fi.Mode(), err)
			}
		})
	}
}
