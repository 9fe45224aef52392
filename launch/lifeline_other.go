//go:build !unix

package launch

import (
	"os"
	"path/filepath"
)

// EnvLifeline: see lifeline.go; no lifeline on this system.
const EnvLifeline = "VRAMSCOPE_LIFELINE"

// Lifeline does nothing here.
type Lifeline struct{}

// NewLifeline returns a Lifeline that does nothing.
func NewLifeline() (*Lifeline, error) { return &Lifeline{}, nil }

// Env is empty here.
func (l *Lifeline) Env() string { return EnvLifeline + "=" }

// ChildEnd is nil here.
func (l *Lifeline) ChildEnd() *os.File { return nil }

// Close does nothing here.
func (l *Lifeline) Close() {}

// PrivateDir makes a private directory in the temporary directory.
func PrivateDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "vramscope-run-")
	return dir, func() { os.RemoveAll(dir) }, err
}

// StartupRoot is the user's cache directory for the startup files.
func StartupRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	root := filepath.Join(base, "vramscope")
	return root, os.MkdirAll(root, 0o700)
}

// CleanStale does nothing here.
func CleanStale(string) int { return 0 }
