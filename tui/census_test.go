package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/vramscope/vramscope/internal/fixture"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// censusEvents are a CPU hello and the hook's two censuses of a loop that
// keeps every loss (testdata/protocol/census.json), a hostile byte put in
// the holder's file name as a process could.
func censusEvents(t *testing.T) []session.Event {
	t.Helper()
	at := time.Unix(1_763_794_800, 0)
	hello := &ipc.Message{V: 1, Type: ipc.TypeHello, Session: "census1", PID: 42, Host: "box",
		Clock: &ipc.Clock{Mono: 10, Wall: float64(at.Unix())}, MemSource: &ipc.MemSource{Kind: "cpu", Peaks: "exact"}}
	evs := []session.Event{{At: at, Conn: 1, Msg: hello}}
	for i, l := range fixture.CensusLines(t) {
		m, err := ipc.Decode([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		m.Seq, m.T = uint64(i+1), 10+float64(i)
		for k := range m.Census.Holders {
			m.Census.Holders[k].File = "/home/ada/train\x1b[2J.py"
		}
		evs = append(evs, session.Event{At: at.Add(time.Duration(i+1) * time.Second), Conn: 1, Msg: m})
	}
	return evs
}

// The c key opens the census page: what grew, the groups, the holders,
// every name escaped; the key asks the process on screen for a census.
func TestCensusPageNamesTheHolderAndAsks(t *testing.T) {
	var asked []string
	m := live(t, censusEvents(t), 120, 40, WithCensusAsker(func(p string) error { asked = append(asked, p); return nil }))
	m, cmd := update(t, m, keyMsg("c"))
	if cmd != nil {
		if msg := cmd(); msg != nil {
			m, _ = update(t, m, msg)
		}
	}
	v := ansi.Strip(m.View())
	for _, want := range []string{
		"Census of live tensors",
		"what grew between the censuses of steps 11 and 16",
		"losses[...] (list) in train(), train\\x1b[2J.py:19 keeps +1 tensor, +1 autograd graph",
		"parameters",
		"losses[...] (local, list) in train(), train\\x1b[2J.py:19: 16 tensors",
		"16 graphs, 116 nodes, saved tensors",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("census page lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(m.View(), "\x1b[2J") {
		t.Error("a raw escape from the hook reached the screen")
	}
	if len(asked) != 1 || asked[0] != "census1" {
		t.Errorf("asked %q, want the process on screen once", asked)
	}
}

// After an out-of-memory error inside a forward, the census page splits the
// saved tensors of the step's graph by module, a hostile module name escaped.
func TestCensusPageSplitsSavedTensorsByModule(t *testing.T) {
	at := time.Unix(1_763_794_800, 0)
	evs := censusEvents(t)[:1]
	m, err := ipc.Decode([]byte(fixture.OOMCensusLine(t)))
	if err != nil {
		t.Fatal(err)
	}
	hostile := "blocks\x1b[2J.3"
	m.Census.SavedByModule.Modules[2].Module = &hostile
	evs = append(evs, session.Event{At: at.Add(time.Second), Conn: 1, Msg: m})
	model, _ := update(t, live(t, evs, 120, 50), keyMsg("c"))
	v := ansi.Strip(model.View())
	for _, want := range []string{"Saved tensors in those graphs, by module", "· blocks.0.fc2 256 KiB", `· blocks\x1b[2J.3 160 KiB`, "· emb 8 KiB"} {
		if !strings.Contains(v, want) {
			t.Errorf("census page lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(model.View(), "\x1b[2J") {
		t.Error("a raw escape from the hook reached the screen")
	}
}
