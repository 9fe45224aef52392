package ipc

import (
	"strings"
	"testing"
)

// The by-module split of the shared fixture (the seed-001 model at scale
// 0.1 as the hook measured it, testdata/protocol/valid.jsonl) decodes, and
// a split that does not add up to activations, or breaks a range, is refused.
func TestDecodeSaved(t *testing.T) {
	var a *Message
	for _, l := range fixtureLines(t, "valid.jsonl") {
		m, err := Decode(l)
		if err != nil {
			t.Fatal(err)
		}
		if m.Saved != nil {
			a = m
		}
	}
	if a == nil {
		t.Fatal("no anatomy with saved in valid.jsonl")
	}
	s := a.Saved
	if len(s.Modules) != 12 || s.Modules[0].Module != "attention" || s.Modules[0].Bytes != 8400000 || s.Modules[0].Largest != 320000 {
		t.Errorf("modules %+v", s.Modules)
	}
	if s.Rest.Modules != 2 || s.Rest.Bytes != 3600 {
		t.Errorf("rest %+v", s.Rest)
	}
	if b := s.Blocks[0]; b.Module != "attention" || b.Own || b.Kept == nil || *b.Kept != 480400 || b.Count != 1 {
		t.Errorf("blocks[0] %+v", b)
	}
	if l := s.Loss; l == nil || l.Largest != 8*50*3000*4 || l.Tensors != 4 {
		t.Errorf("loss %+v", s.Loss)
	}
	head := `{"v":1,"type":"anatomy","seq":1,"t":1,"step":0,"weights":0,"gradients":0,"optimizer":0,"params":0,"device":"cpu",`
	ok := `"modules":[{"module":"blocks.*.mlp","count":4,"bytes":600,"largest":100}],"rest":{"modules":1,"bytes":400},"blocks":[{"module":"blocks.*","count":4,"own":false,"bytes":1000,"kept":40}],"blocks_rest":{"blocks":0,"bytes":0}`
	if _, err := Decode([]byte(head + `"activations":1000,"saved":{` + ok + `,"loss":null}}`)); err != nil {
		t.Errorf("a valid split: %v", err)
	}
	for _, c := range []struct{ body, err string }{
		{`"activations":999,"saved":{` + ok + `}}`, "field saved.modules: sum to 1000"},
		{`"activations":null,"saved":{` + ok + `}}`, "present without activations"},
		{`"activations":1000,"saved":{` + strings.Replace(ok, `"largest":100`, `"largest":601`, 1) + `}}`, "saved.modules.largest"},
		{`"activations":1000,"saved":{` + strings.Replace(ok, `"count":4,"bytes":600`, `"count":0,"bytes":600`, 1) + `}}`, "not a count"},
		{`"activations":1000,"saved":{` + strings.Replace(ok, `"kept":40`, `"kept":-1`, 1) + `}}`, "saved.blocks.kept: negative"},
		{`"activations":1000,"saved":{` + strings.Replace(ok, `"bytes":1000,"kept"`, `"bytes":900,"kept"`, 1) + `}}`, "field saved.blocks: sum to 900"},
		{`"activations":1000,"saved":{` + strings.Replace(ok, `blocks.*.mlp`, strings.Repeat("x", 257), 1) + `}}`, "longer than 256"},
		{`"activations":1000,"saved":{` + ok + `,"loss":{"bytes":1,"largest":2,"tensors":1}}}`, "saved.loss.largest"},
	} {
		if _, err := Decode([]byte(head + c.body)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.body, err, c.err)
		}
	}
}
