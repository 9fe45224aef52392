// Package buildinfo says which vramscope this is: the release version
// (pyhook/vramscope/_version.py, embedded, so every build has it), the VCS
// revision the Go toolchain stamped into the binary (runtime/debug) when it
// knew one, the Go version, whether NVML support was compiled in, and the
// protocol version. Every way of building (go build, go install, make, the
// wheels, a source tarball) gives the same answer, with no linker flags.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/vramscope/vramscope/pyhook"
)

// Info is what a build knows about itself.
type Info struct {
	// Release is the release version the hook and the monitor share,
	// "0.1.0": always known, it is compiled in.
	Release string
	// Version is the main module's version Go stamped: a tag ("v0.1.0"),
	// a pseudo-version that names the commit (go build in a checkout,
	// Go >= 1.24), or "devel" (no VCS information).
	Version string
	// Revision is the VCS commit the binary was built from, "" when unknown
	// (go run, a build outside a checkout, -buildvcs=false).
	Revision string
	// Time is the commit's time (RFC 3339), "" when unknown.
	Time string
	// Modified reports uncommitted changes in the checkout at build time.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
	// NVML reports whether NVML support is compiled in (it needs cgo).
	NVML bool
	// Protocol is the wire protocol major version this build speaks.
	Protocol int
}

// Read returns this binary's Info; protocol is the ipc.Version the caller
// speaks (passed in so this package imports nothing of the program's).
func Read(protocol int) Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(pyhook.Version(), bi, ok, protocol)
}

func fromBuildInfo(release string, bi *debug.BuildInfo, ok bool, protocol int) Info {
	in := Info{Release: release, Version: "devel", GoVersion: runtime.Version(), NVML: nvmlBuiltIn, Protocol: protocol}
	if !ok || bi == nil {
		return in
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// Short is the one-word version recordings and --version carry: the
// release version alone ("0.1.0") for a build of its clean release tag or
// one that knows no revision (-buildvcs=false, a source tarball), else the
// release version with the commit as semver build metadata
// ("0.1.0+0df2a78abc12", ".dirty" with uncommitted changes).
func (in Info) Short() string {
	if in.Revision == "" || (in.Version == "v"+in.Release && !in.Modified) {
		return in.Release
	}
	v := in.Release + "+" + shortRev(in.Revision)
	if in.Modified {
		v += ".dirty"
	}
	return v
}

// String is the full multi-line answer of `vramscope version`.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "vramscope %s\n", in.Short())
	rev := "unknown (built without VCS information)"
	if in.Revision != "" {
		rev = in.Revision
		if in.Time != "" {
			rev += " (" + in.Time + ")"
		}
		if in.Modified {
			rev += ", with uncommitted changes"
		}
	}
	fmt.Fprintf(&b, "revision: %s\n", rev)
	fmt.Fprintf(&b, "go: %s %s/%s\n", in.GoVersion, runtime.GOOS, runtime.GOARCH)
	if in.NVML {
		b.WriteString("nvml: built in (cgo); used when the driver's libnvidia-ml is found at run time\n")
	} else {
		b.WriteString("nvml: not built in (CGO_ENABLED=0 build); rebuild with cgo for driver-side memory\n")
	}
	fmt.Fprintf(&b, "protocol: v%d\n", in.Protocol)
	return b.String()
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
