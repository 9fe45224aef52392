package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestChildEnv(t *testing.T) {
	base := []string{"HOME=/h", "PYTHONPATH=/user/lib", "VRAMSCOPE_SOCKET=/elsewhere.sock", "VRAMSCOPE_AUTOATTACH=0"}
	got := ChildEnv(base, "/run/x.sock", "/run/py", true)
	want := []string{"HOME=/h", "PYTHONPATH=/run/py:/user/lib", "VRAMSCOPE_SOCKET=/run/x.sock", "VRAMSCOPE_AUTOATTACH=1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ChildEnv = %q, want %q", got, want)
	}
	got = ChildEnv([]string{"HOME=/h"}, "/s", "/py", false)
	if strings.Join(got, " ") != "HOME=/h PYTHONPATH=/py VRAMSCOPE_SOCKET=/s VRAMSCOPE_AUTOATTACH=0" {
		t.Errorf("without PYTHONPATH, --no-attach: %q", got)
	}
}

func TestWriteStartup(t *testing.T) {
	dir := t.TempDir()
	hook := fstest.MapFS{
		"__init__.py":                  {Data: []byte("X = 1\n")},
		"_api.py":                      {Data: []byte("")},
		"integrations/lightning.py":    {Data: []byte("")},
		"__pycache__/_api.cpython.pyc": {Data: []byte("stale")},
		"README.txt":                   {Data: []byte("not python")},
	}
	if err := WriteStartup(dir, hook); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sitecustomize.py", "vramscope/__init__.py", "vramscope/_api.py", "vramscope/integrations/lightning.py"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"vramscope/__pycache__", "vramscope/README.txt"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was copied", p)
		}
	}
	if err := WriteStartup(t.TempDir(), fstest.MapFS{"x.py": {}}); err == nil {
		t.Error("a tree without __init__.py was accepted")
	}
}

func TestWaitTurnsTheEndIntoAnExitCode(t *testing.T) {
	tests := []struct {
		script string
		code   int
		desc   string
	}{
		{"exit 0", 0, ""},
		{"exit 7", 7, "exited with status 7"},
		{"kill -TERM $$", 128 + 15, "killed by terminated"},
	}
	for _, tc := range tests {
		c, err := Start(Spec{Argv: []string{"sh", "-c", tc.script}, Env: os.Environ()})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Wait()
		if tc.code == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.script, err)
			}
			continue
		}
		ee, ok := err.(*ExitError)
		if !ok || ee.Code != tc.code || !strings.Contains(ee.Desc, tc.desc) {
			t.Errorf("%s: got %#v, want code %d (%s)", tc.script, err, tc.code, tc.desc)
		}
	}
	if err := Check([]string{"/nonexistent/python"}); err == nil {
		t.Error("Check accepted a missing command")
	}
	if err := Check(nil); err == nil || !strings.Contains(err.Error(), "vramscope run -- python") {
		t.Errorf("Check(nil) = %v", err)
	}
}
