//go:build unix

package ipc

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The hook and the monitor must agree on the default socket path; both
// sides read the cases from the shared fixture.
func TestDefaultSocketPathFixture(t *testing.T) {
	b, err := os.ReadFile("../testdata/protocol/socket_paths.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Case string            `json:"case"`
		Env  map[string]string `json:"env"`
		Want string            `json:"want"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Case, func(t *testing.T) {
			for _, k := range []string{"VRAMSCOPE_SOCKET", "XDG_RUNTIME_DIR"} {
				t.Setenv(k, c.Env[k]) // empty means unset for both sides
			}
			want := strings.ReplaceAll(c.Want, "{uid}", strconv.Itoa(os.Getuid()))
			if got := DefaultSocketPath(); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
