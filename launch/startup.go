package launch

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/vramscope/vramscope/internal/safefs"
)

// sitecustomize is the startup module the child's Python runs first.
//
//go:embed sitecustomize.py
var sitecustomize []byte

// StartupDir returns the directory `vramscope run` puts first on the
// command's PYTHONPATH, holding sitecustomize.py and the hook package. A
// process the command leaves behind keeps that PYTHONPATH, and the next
// Python it starts runs the first sitecustomize.py found there: so the
// directory is one no other user can create or write, and it is never
// removed. It lives in the user's private startup root (StartupRoot) and
// is named for its content, so runs of one binary share it and a run
// never changes one another run's command uses.
func StartupDir(hook fs.FS) (string, error) {
	root, err := StartupRoot()
	if err != nil {
		return "", err
	}
	sum, err := startupDigest(hook)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "startup-"+sum)
	if _, err := os.Lstat(filepath.Join(dir, "sitecustomize.py")); err == nil {
		// Complete: a startup directory is renamed into place once written.
		if _, err := safefs.PrivateDir(dir, 0o055); err != nil {
			return "", fmt.Errorf("the startup directory: %w", err)
		}
		return dir, nil
	}
	tmp, err := os.MkdirTemp(root, ".startup-")
	if err != nil {
		return "", fmt.Errorf("make the startup directory: %w", err)
	}
	if err := WriteStartup(tmp, hook); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp) // another run put the same content there first
		if _, err := safefs.PrivateDir(dir, 0o055); err != nil {
			return "", fmt.Errorf("the startup directory: %w", err)
		}
	}
	return dir, nil
}

// startupDigest names the startup files' content: sitecustomize.py and
// every .py of the hook, in WalkDir's (lexical) order.
func startupDigest(hook fs.FS) (string, error) {
	h := sha256.New()
	h.Write(sitecustomize)
	if hook != nil {
		err := fs.WalkDir(hook, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path.Ext(p) != ".py" {
				return err
			}
			b, err := fs.ReadFile(hook, p)
			fmt.Fprintf(h, "\x00%s\x00%d\x00", p, len(b))
			h.Write(b)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("read the hook package: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// WriteStartup fills dir (which must exist, private to the user) with
// sitecustomize.py and a copy of the hook package taken from hook, whose
// root holds the package's files (__init__.py, _api.py, …). The copy makes
// `vramscope run` work with a Python that has no vramscope installed, and
// keeps the hook the same version as the monitor. __pycache__ and files
// other than .py are skipped.
func WriteStartup(dir string, hook fs.FS) error {
	if err := safefs.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o600); err != nil {
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
		return safefs.WriteFile(filepath.Join(pkg, filepath.FromSlash(p)), b, 0o600)
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
