package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/fixture"
	"github.com/vramscope/vramscope/ipc"
)

// censusLines are the hook's two censuses of a loop that appends every loss
// to a list (testdata/protocol/census.json): steps 11 and 16.
func censusLines(t *testing.T) []ipc.Message {
	t.Helper()
	msgs := demoMessages(t, "steady", 20)[:1]
	for _, l := range fixture.CensusLines(t) {
		m, err := ipc.Decode([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		m.T = msgs[0].Clock.Mono + float64(m.Step)
		msgs = append(msgs, *m)
	}
	for i := range msgs {
		msgs[i].Seq = uint64(i)
	}
	return msgs
}

func TestCulpritNamesTheListThatKeepsTheLosses(t *testing.T) {
	s, p := storeOf(t, censusLines(t), false)
	d := Diagnose(s, p)
	cs := d.Culprits
	if cs == nil || len(cs.Grew) != 1 {
		t.Fatalf("culprits %+v, want the losses list alone (x holds one tensor at both censuses)", cs)
	}
	c := cs.Grew[0]
	if c.Name != "losses[...]" || c.TensorsPerStep != 1 || c.GraphsPerStep != 1 || !c.GraphsFreed || c.Line != 19 {
		t.Fatalf("culprit %+v", c)
	}
	h := d.Headline()
	for _, want := range []string{"held by losses[...] (list) in train(), train.py:19", "+1 tensor", "+1 autograd graph",
		"backward freed their saved tensors", "4 B per step", "graphs of steps ≤11–16"} {
		if !strings.Contains(h, want) {
			t.Errorf("headline %q lacks %q", h, want)
		}
	}
	if !strings.Contains(strings.Join(d.Lines(), "\n"), "what grew between the censuses of steps 11 and 16") {
		t.Errorf("lines lack the comparison: %q", d.Lines())
	}
}

// One census, or two of which nothing grew in (the same census twice at
// another step), name no culprit.
func TestNoCulpritWithoutGrowth(t *testing.T) {
	msgs := censusLines(t)
	if _, p := storeOf(t, msgs[:2], false); CulpritsOf(p) != nil {
		t.Fatal("a culprit from one census")
	}
	same := msgs[1]
	same.Step += 5
	same.Seq = 2
	same.T += 5
	if _, p := storeOf(t, []ipc.Message{msgs[0], msgs[1], same}, false); CulpritsOf(p) != nil {
		t.Fatal("a culprit from two equal censuses")
	}
}
