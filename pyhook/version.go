// Package pyhook gives the Go program what it takes from the Python hook's
// source tree: the release version, which vramscope/_version.py holds for
// both halves (docs/install.md), so the monitor, the hook and the wheels
// carry one version from one file.
package pyhook

import (
	_ "embed"
	"regexp"
)

//go:embed vramscope/_version.py
var versionFile string

var versionLine = regexp.MustCompile(`(?m)^__version__ = "([0-9A-Za-z.+-]+)"\s*$`)

// Version returns the release version written in vramscope/_version.py,
// "0.1.0" for example, or "unknown" if that file lost its one line (a test
// pins that it has it).
func Version() string {
	m := versionLine.FindStringSubmatch(versionFile)
	if m == nil {
		return "unknown"
	}
	return m[1]
}
