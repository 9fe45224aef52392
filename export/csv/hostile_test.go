package csv_test

import (
	"bytes"
	stdcsv "encoding/csv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/export/csv"
	"github.com/vramscope/vramscope/internal/textesc"
)

// TestHostileTextIsEscaped: the CSV carried a hostile recording's control
// bytes raw, 180 of them for the probe's file; the
// fixture is described in report/hostile_test.go. Every field is still one
// CSV field.
func TestHostileTextIsEscaped(t *testing.T) {
	s, _, _, err := export.Load("../../testdata/recordings/hostile_text.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := csv.Write(&b, s); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(b.String(), "\n") {
		if !textesc.Safe(line) {
			t.Errorf("line %d carries control characters: %q", i+1, line)
		}
	}
	rows, err := stdcsv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, r := range rows[1:] {
		if !strings.HasPrefix(r[1], `host\x1b]0;pwned\x07`) {
			t.Errorf("host field %q", r[1])
		}
		if strings.HasPrefix(r[7], `user\x1b]0;pwned`) {
			users++
		}
	}
	if users == 0 {
		t.Error("no row for the user phase")
	}
}
