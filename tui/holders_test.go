package tui

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// The anatomy page of a CPU run whose hook sent the seed-001 split (the
// shared fixture's CPU connection): the by-module list with its bars, the
// largest blocks and the advice.
func TestAnatomyPageListsWhoHoldsTheSavedTensors(t *testing.T) {
	valid, err := os.ReadFile("../testdata/protocol/valid.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var evs []session.Event
	at := time.Unix(1_763_794_800, 0)
	cpu := false
	for _, l := range bytes.Split(bytes.TrimSpace(valid), []byte("\n")) {
		m, err := ipc.Decode(l)
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == ipc.TypeHello {
			cpu = m.CUDA == nil
		}
		if !cpu {
			continue
		}
		at = at.Add(time.Millisecond)
		evs = append(evs, session.Event{At: at, Conn: 1, Msg: m})
	}
	m := live(t, evs, 100, 60)
	m = press(t, m, "a")
	v := ansi.Strip(m.View())
	for _, want := range []string{
		"CPU run: no GPU memory, no allocator; the tensors the hook measured:", // not "nothing to break down": the tensors are known
		"Saved for backward, by module",
		"step 6: 18 MiB = model's forward 14 MiB + loss 5 MiB",
		"attention                             8 MiB   44% ━━━━━━━━━━━━━━━━━━━ ",
		"loss (outside the model)              5 MiB   25% ━━━━━━━━━━━",
		"(2 more)                              4 KiB    0%",
		"Largest blocks",
		"→ checkpoint attention: saves about 8 MiB (estimate: its saved tensors 8 MiB less its inputs",
		"→ checkpoint encoder: saves about 2 MiB",
		"→ the loss saves 5 MiB outside the model",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("anatomy page lacks %q:\n%s", want, v)
		}
	}
}
