package report

import (
	"encoding/json"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// The report's hook object is its own type: its bytes are the fields
// docs/report.md lists, whatever fields the wire's HookConfig gains.
func TestHookObjectBytes(t *testing.T) {
	for _, tc := range []struct {
		in   *ipc.HookConfig
		want string
	}{
		{nil, `null`},
		{&ipc.HookConfig{Version: "0.1.0", SampleHz: 50, ActivationsEvery: 100},
			`{"version":"0.1.0","sample_hz":50,"reset_peaks":false,"activations_every":100}`},
		{&ipc.HookConfig{Version: "0.2.0", SampleHz: 12.5, ResetPeaks: true, ActivationsEvery: 0, ExactPeaks: true},
			`{"version":"0.2.0","sample_hz":12.5,"reset_peaks":true,"activations_every":0,"exact_peaks":true}`},
	} {
		got, err := json.Marshal(hookOf(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("hook %+v\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}
