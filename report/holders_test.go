package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// seed001Anatomy is the anatomy with a by-module split in the shared
// fixture: the seed-001 model at scale 0.1 as the hook measured it on CPU.
func seed001Anatomy(t *testing.T) ipc.Message {
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
			return *m
		}
	}
	t.Fatal("no anatomy with saved in the fixture")
	return ipc.Message{}
}

// A CPU run whose hook sent the seed-001 split: the report names the loss's
// saved tensors with their size and the largest blocks with their shares,
// in text and in JSON.
func TestReportNamesTheLossAndTheLargestBlocks(t *testing.T) {
	msgs := cpuRun(generate(t, "warmup", 4))
	a := seed001Anatomy(t)
	a.Seq = uint64(len(msgs))
	a.T = msgs[len(msgs)-1].T
	msgs = append(msgs, a)
	r := Build(storeOf(msgs, false))
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"saved for backward at step 6: 18 MiB (the model's forward 14 MiB + the loss's 5 MiB)",
		"      attention                               8 MiB   44%\n",
		"      loss (outside the model)                5 MiB   25%\n",
		"      (2 modules more)                        4 KiB    0%\n",
		"largest blocks: attention 8 MiB (44%), encoder 2 MiB (12%), cell1 1 MiB (7%)",
		"the loss's saved tensors (5 MiB) are not in activations",
		"checkpoint attention (torch.utils.checkpoint around each): saves about 8 MiB (estimate)",
		"compute the cross-entropy in chunks of positions",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Processes []struct {
			Anatomy struct {
				Holders struct {
					Loss    int64 `json:"loss"`
					Modules []struct {
						Module  string  `json:"module"`
						Outside bool    `json:"outside"`
						Bytes   int64   `json:"bytes"`
						Share   float64 `json:"share"`
					} `json:"modules"`
					Checkpoint []struct {
						Module string `json:"module"`
						Saving int64  `json:"saving"`
					} `json:"checkpoint"`
				} `json:"holders"`
			} `json:"anatomy"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	h := doc.Processes[0].Anatomy.Holders
	if h.Loss != 4803212 || !h.Modules[1].Outside || h.Modules[1].Bytes != 4803212 || len(h.Checkpoint) != 2 || h.Checkpoint[0].Saving != 8560000-480400 {
		t.Errorf("JSON holders %+v", h)
	}
}
