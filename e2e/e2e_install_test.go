package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeInstallWorksAsWritten runs the README's first install block,
// line by line as written, in a fresh copy of the committed tree (git
// archive) with a fresh venv's pip first on PATH: the monitor builds, the
// hook installs, and the venv's Python imports it outside the checkout.
func TestReadmeInstallWorksAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the monitor and a venv")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	i := strings.Index(sec, "\n## Install\n")
	if i < 0 {
		t.Fatal("README.md has no Install section")
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(sec[i:])
	if m == nil {
		t.Fatal("the Install section has no sh block")
	}
	if strings.Contains(m[1], "pip install vramscope") {
		t.Errorf("the first install block uses the unpublished PyPI package:\n%s", m[1])
	}
	for _, tool := range []string{"git", "make", "go", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", "git archive --format=tar HEAD | tar -x -C '"+src+"'").CombinedOutput(); err != nil {
		t.Skipf("no committed tree to copy: %v\n%s", err, out)
	}
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PATH="+filepath.Join(venv, "bin")+":"+os.Getenv("PATH"), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	for _, line := range strings.Split(strings.TrimSpace(m[1]), "\n") {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = src, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README line %q failed: %v\n%s", line, err, out)
		}
		t.Logf("%s\n%s", line, out)
	}
	py := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import vramscope, sys; print(vramscope.__file__)")
	py.Dir = dir
	out, err := py.CombinedOutput()
	if err != nil || !strings.Contains(string(out), filepath.Join(venv, "lib")) {
		t.Errorf("the hook did not install into the venv: %v\n%s", err, out)
	}
}
