package diff_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/internal/fixture"
)

// A side that died of an out-of-memory error says what was alive then, by
// category, in the text and the JSON; the side that did not says nothing.
func TestDiffSaysWhatWasAliveAtTheOOM(t *testing.T) {
	res := diff.Compare(storeWith(t, census("x", "4096")), storeWith(t, fixture.OOMCensusLine(t)), "before", "after")
	p := res.Pairs[0]
	if p.A.AtOOM != nil || p.B.AtOOM == nil || p.B.AtOOM.Step != 2 {
		t.Fatalf("at_oom A %+v, B %+v", p.A.AtOOM, p.B.AtOOM)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"  B: alive at the out-of-memory error (step 2): weights 394 KiB",
		"\n      saved activations by module: blocks.0.fc2 256 KiB; blocks.1.fc2 256 KiB; blocks.2.fc1 160 KiB; blocks.0.fc1 32 KiB; other modules 40 KiB\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "A: alive") {
		t.Errorf("A did not die:\n%s", out)
	}
	buf.Reset()
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Pairs []struct {
			A, B struct {
				AtOOM *struct {
					SavedInGraphs int64 `json:"saved_in_graphs"`
				} `json:"at_oom"`
			}
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	if js.Pairs[0].A.AtOOM != nil || js.Pairs[0].B.AtOOM == nil || js.Pairs[0].B.AtOOM.SavedInGraphs != 761856 {
		t.Fatalf("json %s", buf.String())
	}
}
