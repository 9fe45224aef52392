package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8",
		Main: debug.Module{Path: "github.com/vramscope/vramscope", Version: "v0.0.0-20261122175323-0df2a78abc12+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0df2a78abc1234567890"},
			{Key: "vcs.time", Value: "2026-11-22T17:53:23Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0df2a78abc1234567890"}, {Key: "vcs.modified", Value: "false"}}}
	// -buildvcs=false or a source tarball: Go stamps no version, no revision.
	novcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	tagged := func(tag string, modified bool) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tag},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0df2a78abc1234567890"},
				{Key: "vcs.modified", Value: map[bool]string{true: "true", false: "false"}[modified]}}}
	}
	tests := []struct {
		name  string
		bi    *debug.BuildInfo
		short string
		lines []string
	}{
		{"go build in a checkout", stamped, "0.1.0+0df2a78abc12.dirty",
			[]string{"vramscope 0.1.0+0df2a78abc12.dirty\n", "revision: 0df2a78abc1234567890 (2026-11-22T17:53:23Z), with uncommitted changes", "go: go1.26.8", "protocol: v1"}},
		{"devel with a revision", devel, "0.1.0+0df2a78abc12", []string{"revision: 0df2a78abc1234567890\n"}},
		{"built without VCS information", novcs, "0.1.0", []string{"vramscope 0.1.0\n", "revision: unknown"}},
		{"no build info", nil, "0.1.0", []string{"vramscope 0.1.0\n", "revision: unknown"}},
		{"the release tag, clean", tagged("v0.1.0", false), "0.1.0", []string{"vramscope 0.1.0\n", "revision: 0df2a78abc1234567890\n"}},
		{"the release tag, modified", tagged("v0.1.0+dirty", true), "0.1.0+0df2a78abc12.dirty", nil},
		{"another tag than the release", tagged("v0.2.0", false), "0.1.0+0df2a78abc12", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := fromBuildInfo("0.1.0", tc.bi, tc.bi != nil, 1)
			if got := in.Short(); got != tc.short {
				t.Errorf("Short() = %q, want %q", got, tc.short)
			}
			s := in.String()
			for _, l := range tc.lines {
				if !strings.Contains(s, l) {
					t.Errorf("String() lacks %q:\n%s", l, s)
				}
			}
			if !strings.Contains(s, "nvml: ") {
				t.Errorf("String() lacks the NVML line:\n%s", s)
			}
		})
	}
}

// The real binary's release version is the embedded one, never empty.
func TestReadHasTheRelease(t *testing.T) {
	in := Read(1)
	if in.Release == "" || in.Release == "unknown" || !strings.HasPrefix(in.Short(), in.Release) {
		t.Fatalf("Read: Release %q, Short %q", in.Release, in.Short())
	}
}
