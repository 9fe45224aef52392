package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/textesc"
)

// hostileRecording carries OSC 0 (window title), CSI 2J (clear), OSC 52
// (clipboard), SGR, \r, \b, a C1 CSI and DEL in every string a hook or a
// file supplies: host, argv, torch, device name, hook version, user phase
// names, mark names and note texts.
const hostileRecording = "../testdata/recordings/hostile_text.jsonl"

// TestHostileTextIsEscaped: the text report printed 91 control bytes of
// such a file raw (80 of this fixture's); now it prints none but its own
// newlines, and the JSON keeps the original bytes.
func TestHostileTextIsEscaped(t *testing.T) {
	rep := Build(loadRecording(t, hostileRecording))
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(b.String(), "\n") {
		if !textesc.Safe(line) {
			t.Errorf("line %d carries control characters: %q", i+1, line)
		}
	}
	for _, want := range []string{`host\x1b]0;pwned\x07`, `dev\x1b]0;pwned`, `torch\x1b]0;pwned`, `arg\x1b]0;pwned`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report does not show %q escaped", want)
		}
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Processes []struct{ Host string }
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Processes) != 1 || !strings.HasPrefix(back.Processes[0].Host, "host\x1b]0;pwned\x07") {
		t.Errorf("JSON host = %q, want the original bytes", back.Processes)
	}
}
