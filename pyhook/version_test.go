package pyhook

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The embedded file parses to a release version of the shape PyPI and Go
// tags share (X.Y.Z with an optional pre-release), never "unknown".
func TestVersionParses(t *testing.T) {
	v := Version()
	if !regexp.MustCompile(`^\d+\.\d+\.\d+([a-z]+\d+)?$`).MatchString(v) {
		t.Fatalf("Version() = %q, want X.Y.Z[rcN] from vramscope/_version.py", v)
	}
}

// Python reads the same file to the same string.
func TestPythonAgrees(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	out, err := exec.Command(py, "-c", "import sys; sys.path.insert(0, 'vramscope'); import _version; print(_version.__version__)").Output()
	if err != nil {
		t.Fatalf("python3 reads vramscope/_version.py: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != Version() {
		t.Fatalf("python says %q, Go says %q", got, Version())
	}
}

func TestVersionLine(t *testing.T) {
	for in, want := range map[string]bool{
		"__version__ = \"1.2.3\"\n":       true,
		"x\n__version__ = \"1.2.3rc1\"\n": true,
		"__version__ = '1.2.3'\n":         false,
		"__version__ = \"1.2.3\" # no\n":  false,
		"version = \"1.2.3\"\n":           false,
	} {
		if got := versionLine.MatchString(in); got != want {
			t.Errorf("%q: match %v, want %v", in, got, want)
		}
	}
}
