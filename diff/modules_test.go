package diff_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// storeWith is a CPU run with one anatomy line.
func storeWith(t *testing.T, anatomy string) *session.Store {
	t.Helper()
	s := session.New()
	at := time.Unix(1_763_794_800, 0)
	for i, l := range []string{
		`{"v":1,"type":"hello","seq":0,"t":12.0,"session":"cpu","pid":77,"host":"laptop","argv":["train.py"],"rank":null,"local_rank":null,"world_size":null,"torch":"1.13","cuda":null,"clock":{"mono":12.0,"wall":1763794800.0}}`,
		`{"v":1,"type":"phase","seq":1,"t":12.1,"name":"forward","step":0,"micro":0,"edge":"begin","user":false,"mem":null}`,
		`{"v":1,"type":"phase","seq":2,"t":12.2,"name":"forward","step":0,"micro":0,"edge":"end","user":false,"mem":null}`,
		`{"v":1,"type":"phase","seq":3,"t":12.3,"name":"forward","step":1,"micro":0,"edge":"begin","user":false,"mem":null}`,
		`{"v":1,"type":"phase","seq":4,"t":12.4,"name":"forward","step":1,"micro":0,"edge":"end","user":false,"mem":null}`,
		anatomy,
	} {
		m, err := ipc.Decode([]byte(l))
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		s.Apply(session.Event{At: at.Add(time.Duration(i) * time.Millisecond), Conn: 1, Msg: m})
	}
	return s
}

// The pyhook test model "three MLP blocks" (pyhook/tests/test_modules.py:
// N=32, D=16, f32) before and after checkpointing its blocks: the blocks'
// 30720 saved bytes go, the model's own ops gain their 6144 bytes of
// inputs; the loss did not move.
func TestDiffShowsWhichModulesMoved(t *testing.T) {
	head := `{"v":1,"type":"anatomy","seq":5,"t":12.5,"step":1,"weights":0,"gradients":0,"optimizer":0,"batch_size":32,"params":0,"device":"cpu",`
	plain := head + `"activations":32768,"saved":{"modules":[{"module":"blocks.*.1","count":3,"bytes":24576,"largest":8192},{"module":"blocks.*.0","count":3,"bytes":6144,"largest":2048},{"module":"inp","count":1,"bytes":2048,"largest":2048}],"rest":{"modules":0,"bytes":0},` +
		`"blocks":[{"module":"blocks.*","count":3,"own":false,"bytes":30720,"kept":6144},{"module":"inp","count":1,"own":false,"bytes":2048,"kept":2048}],"blocks_rest":{"blocks":0,"bytes":0},"loss":{"bytes":2048,"largest":2048,"tensors":1}}}`
	ckpt := head + `"activations":8192,"saved":{"modules":[{"module":"","count":1,"bytes":6144,"largest":2048},{"module":"inp","count":1,"bytes":2048,"largest":2048}],"rest":{"modules":0,"bytes":0},` +
		`"blocks":[{"module":"inp","count":1,"own":false,"bytes":2048,"kept":2048},{"module":"","count":1,"own":true,"bytes":6144,"kept":null}],"blocks_rest":{"blocks":0,"bytes":0},"loss":{"bytes":2048,"largest":2048,"tensors":1}}}`
	res := diff.Compare(storeWith(t, plain), storeWith(t, ckpt), "plain", "checkpointed")
	p := res.Pairs[0]
	if c := p.Saved.Change; c == nil || *c != 8192-32768 {
		t.Fatalf("saved change %v", p.Saved)
	}
	want := []string{"blocks.*.1 ×3", "blocks.*.0 ×3", "(model)"}
	if strings.Join(p.ModulesMoved, "|") != strings.Join(want, "|") {
		t.Errorf("moved %q, want %q", p.ModulesMoved, want)
	}
	for _, m := range p.Modules {
		if m.Label == "(model)" && (m.A != 0 || m.B != 6144) {
			t.Errorf("(model) %+v: absent from a complete list is 0", m.Delta)
		}
		if m.Label == "inp" && (m.Change == nil || *m.Change != 0) {
			t.Errorf("inp %+v", m.Delta)
		}
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"saved for backward: 34 KiB → 10 KiB (−24 KiB)", // the loss's 2 KiB included
		"    blocks.*.1 ×3 24 KiB → 0 B (−24 KiB)",
		"    (model) 0 B → 6 KiB (+6 KiB)",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, b.String())
		}
	}
}
