package launch

import (
	_ "embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// sitecustomize is the startup module the child's Python runs first.
//
//go:embed sitecustomize.py
var sitecustomize []byte

// WriteStartup fills dir (which must exist, private to the user) with
// sitecustomize.py and a copy of the hook package taken from hook, whose
// root holds the package's files (__init__.py, _api.py, …). The copy makes
// `vramscope run` work with a Python that has no vramscope installed, and
// keeps the hook the same version as the monitor. __pycache__ and files
// other than .py are skipped.
func WriteStartup(dir string, hook fs.FS) error {
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o600); err != nil {
		return fmt.Errorf("write startup module: %w", err)
	}
	if hook == nil {
		return nil
	}
	pkg := filepath.Join(dir, "vramscope")
	found := false
	err := fs.WalkDir(hook, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return fs.SkipDir
			}
			return os.MkdirAll(filepath.Join(pkg, filepath.FromSlash(p)), 0o700)
		}
		if path.Ext(p) != ".py" {
			return nil
		}
		b, err := fs.ReadFile(hook, p)
		if err != nil {
			return err
		}
		if p == "__init__.py" {
			found = true
		}
		return os.WriteFile(filepath.Join(pkg, filepath.FromSlash(p)), b, 0o600)
	})
	if err != nil {
		return fmt.Errorf("copy the hook package to %s: %w", pkg, err)
	}
	if !found {
		return fmt.Errorf("copy the hook package to %s: no __init__.py in the embedded package", pkg)
	}
	return nil
}

// SubFS returns the hook package inside an embedded tree (e.g. the
// repository's pyhook/vramscope), or an error naming what is missing.
func SubFS(tree fs.FS, dir string) (fs.FS, error) {
	sub, err := fs.Sub(tree, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, fmt.Errorf("hook package %s: %w", dir, err)
	}
	return sub, nil
}
