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
	tests := []struct {
		name  string
		bi    *debug.BuildInfo
		short string
		lines []string
	}{
		{"go build in a checkout", stamped, "v0.0.0-20261122175323-0df2a78abc12+dirty",
			[]string{"revision: 0df2a78abc1234567890 (2026-11-22T17:53:23Z), with uncommitted changes", "go: go1.26.8", "protocol: v1"}},
		{"devel with a revision", devel, "devel+0df2a78abc12", []string{"revision: 0df2a78abc1234567890\n"}},
		{"no build info", nil, "devel", []string{"revision: unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := fromBuildInfo(tc.bi, tc.bi != nil, 1)
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
