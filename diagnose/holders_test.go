package diagnose

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// savedFixture is the anatomy with a by-module split in the shared fixture
// (testdata/protocol/valid.jsonl): the seed-001 model at scale 0.1, measured
// by the hook on CPU torch 1.13.
func savedFixture(t *testing.T) *ipc.Message {
	t.Helper()
	b, err := os.ReadFile("../testdata/protocol/valid.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		m, err := ipc.Decode(l)
		if err != nil {
			t.Fatal(err)
		}
		if m.Saved != nil {
			return m
		}
	}
	t.Fatal("no anatomy with saved in the fixture")
	return nil
}

func TestHoldersOfTheSeed001Fixture(t *testing.T) {
	hello, err := ipc.Decode([]byte(`{"v":1,"type":"hello","seq":0,"t":12.0,"session":"cpu","pid":77,"host":"laptop","argv":["train.py"],"rank":null,"local_rank":null,"world_size":null,"torch":"1.13","cuda":null,"clock":{"mono":12.0,"wall":1763794800.0}}`))
	if err != nil {
		t.Fatal(err)
	}
	a := savedFixture(t)
	// a later scaled anatomy keeps the measured split
	acts := int64(2 * 14493264)
	scaled := &ipc.Message{V: 1, Type: ipc.TypeAnatomy, Seq: a.Seq + 1, T: a.T + 1, Step: 9, Activations: &acts, ActivationsSource: "scaled"}
	s := session.New()
	at := time.Unix(1_763_794_800, 0)
	for i, m := range []*ipc.Message{hello, a, scaled} {
		s.Apply(session.Event{At: at.Add(time.Duration(i) * time.Millisecond), Conn: 1, Msg: m})
	}
	p := s.Processes()[0]
	h := HoldersOf(p.Anatomy)
	if h == nil {
		t.Fatal("no holders")
	}
	const activations, loss = 14493264, 4803212
	if h.Step != 6 || h.Activations != activations || h.Loss != loss || h.Saved != activations+loss || h.LossTensors != 4 {
		t.Errorf("totals %+v", h)
	}
	// the loss takes its place among the modules: second, after attention
	if len(h.Modules) != 13 || h.Modules[0].Module != "attention" || !h.Modules[1].Outside || h.Modules[1].Bytes != loss {
		t.Errorf("modules %+v", h.Modules[:2])
	}
	if got := h.Modules[1].Label(); got != "loss (outside the model)" {
		t.Errorf("loss label %q", got)
	}
	if sh := h.Modules[0].Share; sh < 0.435 || sh > 0.436 { // 8400000 / 19296476
		t.Errorf("attention share %v", sh)
	}
	// attention saves 8560000 and keeps 480400; the encoder 2323600 and 3200;
	// cell1's 960000 (5 %) is below CheckpointShare
	if len(h.Checkpoint) != 2 || h.Checkpoint[0].Module != "attention" || h.Checkpoint[0].Saving != 8560000-480400 ||
		h.Checkpoint[1].Module != "encoder" || h.Checkpoint[1].Saving != 2323600-3200 {
		t.Errorf("checkpoint %+v", h.Checkpoint)
	}
	// 24.9 % of the saved bytes, and the largest single tensor
	if !h.LossDominates || !h.LossLargestItem {
		t.Errorf("loss dominates %v largest %v", h.LossDominates, h.LossLargestItem)
	}
	adv := h.Advice()
	if len(adv) != 3 || !strings.HasPrefix(adv[0].Text, "checkpoint attention") || !strings.Contains(adv[0].Text, "about 8 MiB") || !strings.Contains(adv[0].Because, "its inputs, 469 KiB") ||
		!strings.Contains(adv[2].Text, "chunks") || !strings.Contains(adv[2].Because, "largest single item") {
		t.Errorf("advice %+v", adv)
	}
}

func TestHoldersLabelsEscapeAndCollapse(t *testing.T) {
	if got := (Holder{Module: "blocks.*.mlp", Count: 4}).Label(); got != "blocks.*.mlp ×4" {
		t.Errorf("%q", got)
	}
	if got := (Holder{Module: "", Count: 1}).Label(); got != "(model)" {
		t.Errorf("%q", got)
	}
	if got := (Holder{Module: "a\x1b[2Jb\\", Count: 1}).Label(); got != `a\u{1b}[2Jb\u{5c}` {
		t.Errorf("%q", got)
	}
	if got := (Block{Module: "transformer", Count: 1, Own: true}).Label(); got != "transformer (own ops)" {
		t.Errorf("%q", got)
	}
	if HoldersOf(nil) != nil || HoldersOf(&session.Anatomy{}) != nil {
		t.Error("holders without a split")
	}
}
