package ipc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type memSourceFixture struct {
	Valid []struct {
		Case  string          `json:"case"`
		Hello json.RawMessage `json:"hello"`
	} `json:"valid"`
	Invalid []struct {
		Case  string `json:"case"`
		Line  string `json:"line"`
		Error string `json:"error"`
	} `json:"invalid"`
}

func loadMemSources(t *testing.T) memSourceFixture {
	t.Helper()
	b, err := os.ReadFile("../testdata/protocol/mem_sources.json")
	if err != nil {
		t.Fatal(err)
	}
	var f memSourceFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Valid) == 0 || len(f.Invalid) == 0 {
		t.Fatal("empty fixture")
	}
	return f
}

// TestMemSourcesFixture decodes every hello of the shared fixture and
// names its source; the invalid ones fail with their one-line error.
func TestMemSourcesFixture(t *testing.T) {
	f := loadMemSources(t)
	want := map[string]string{"cuda": "cuda", "rocm": "rocm", "xpu": "xpu", "mps": "mps",
		"cpu": "cpu", "cpu without clear_refs": "cpu", "cpu without /proc": "cpu", "older hook, CUDA": "cuda"}
	for _, c := range f.Valid {
		m, err := Decode(c.Hello)
		if err != nil {
			t.Fatalf("%s: %v", c.Case, err)
		}
		if got := SourceKind(m); got != want[c.Case] {
			t.Errorf("%s: source %q, want %q", c.Case, got, want[c.Case])
		}
		if c.Case == "xpu" && (m.MemSource.Name == "" || m.MemSource.Total != 68719476736 || m.MemSource.Peaks != PeaksCounter) {
			t.Errorf("xpu: %+v", m.MemSource)
		}
	}
	for _, c := range f.Invalid {
		_, err := Decode([]byte(c.Line))
		if err == nil || !strings.Contains(err.Error(), c.Error) {
			t.Errorf("%s: error %v, want %q", c.Case, err, c.Error)
		}
	}
	if SourceKind(&Message{}) != "" || SourceKind(nil) != "" {
		t.Error("an older hook's CPU run has no source")
	}
}
