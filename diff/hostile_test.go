package diff_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/internal/textesc"
)

// TestHostileTextIsEscaped: diff printed a hostile recording's control
// bytes raw; the fixture is described in
// report/hostile_test.go.
func TestHostileTextIsEscaped(t *testing.T) {
	s, _, _, err := export.Load("../testdata/recordings/hostile_text.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	res := diff.Compare(s, s, "a\x1b[2J", "b")
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "user") {
		t.Fatalf("the diff does not show the user phase:\n%s", b.String())
	}
	for i, line := range strings.Split(b.String(), "\n") {
		if !textesc.Safe(line) {
			t.Errorf("line %d carries control characters: %q", i+1, line)
		}
	}
}
