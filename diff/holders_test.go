package diff_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diff"
)

// census is a census line naming holders with their bytes.
func census(holders ...string) string {
	var hs []string
	for i := 0; i+1 < len(holders); i += 2 {
		name, _ := json.Marshal(holders[i])
		hs = append(hs, fmt.Sprintf(`{"kind":"local","name":%s,"container":"list","function":"train","file":"train.py","line":9,"tensors":1,"bytes":%s,"dtype":"float32","graphs":0,"graph_nodes":0,"graph_saved":0,"graph_freed":0,"first_step":null,"last_step":null}`, name, holders[i+1]))
	}
	return `{"v":1,"type":"census","seq":5,"t":12.5,"step":1,"census":{"reason":"user","request":null,"device":"cpu","tensors":3,` +
		`"groups":{"parameters":{"bytes":0,"tensors":0},"gradients":{"bytes":0,"tensors":0},"optimizer":{"bytes":0,"tensors":0},"other":{"bytes":0,"tensors":0}},` +
		`"holders":[` + strings.Join(hs, ",") + `],"rest":{"holders":0,"bytes":0},"unattributed":{"groups":0,"tensors":0,"bytes":0},"complete":true,"cost_ms":{"list":1,"holders":1,"graphs":1,"total":3}}}`
}

// Holders of the two runs' newest censuses are paired by name: one that
// grew by a MiB or more, one that appeared, moved; one steady did not. A
// hostile name is escaped in the text.
func TestDiffShowsWhichHoldersMoved(t *testing.T) {
	a := census("losses[...]", "1048576", "x", "4096")
	b := census("losses[...]", "8388608", "x", "4096", "cache\x1b[2J", "2097152")
	res := diff.Compare(storeWith(t, a), storeWith(t, b), "before", "after")
	p := res.Pairs[0]
	if strings.Join(p.HoldersMoved, "|") != "cache\x1b[2J|losses[...]" {
		t.Fatalf("moved %q", p.HoldersMoved)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"census holders that moved:", "losses[...] (local) 1 MiB → 8 MiB (+7 MiB)", `cache\x1b[2J (local) 0 B → 2 MiB`} {
		if !strings.Contains(out, want) {
			t.Errorf("diff text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[2J") {
		t.Error("a raw escape reached the text")
	}
}
