package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// anatomyMsg is an anatomy of step with activations acts from source,
// carrying a split when split.
func anatomyMsg(step int, acts int64, source string, split bool) *ipc.Message {
	m := &ipc.Message{Type: ipc.TypeAnatomy, Step: step, Activations: &acts, ActivationsSource: source}
	if source == "scaled" {
		m.ActivationsStep = new(int)
	}
	if split {
		m.Saved = &ipc.Saved{Modules: []ipc.SavedModule{{Module: "fc", Count: 1, Bytes: acts, Largest: acts}}}
	}
	return m
}

// The newest anatomy's split is the last one the hook took, labelled with
// the step and total it was taken at: a measured anatomy carries one only
// where it could have changed (docs/anatomy.md, "By module").
func TestAnatomyKeepsTheLastSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		msgs  []*ipc.Message
		split bool
		step  int
		total Bytes
	}{
		{"measured with a split", []*ipc.Message{
			anatomyMsg(0, 100, "measured", true)}, true, 0, 100},
		{"measured without one keeps the last", []*ipc.Message{
			anatomyMsg(2, 100, "measured", true),
			anatomyMsg(100, 104, "measured", false)}, true, 2, 100},
		{"a newer split replaces it", []*ipc.Message{
			anatomyMsg(2, 100, "measured", true),
			anatomyMsg(100, 130, "measured", false),
			anatomyMsg(200, 130, "measured", true)}, true, 200, 130},
		{"scaled keeps the last", []*ipc.Message{
			anatomyMsg(2, 100, "measured", true),
			anatomyMsg(100, 100, "measured", false),
			anatomyMsg(150, 200, "scaled", false)}, true, 2, 100},
		{"never split", []*ipc.Message{
			anatomyMsg(0, 100, "measured", false),
			anatomyMsg(1, 100, "measured", false)}, false, 0, Unknown},
		{"a source not said keeps none", []*ipc.Message{
			anatomyMsg(2, 100, "measured", true),
			anatomyMsg(3, 100, "", false)}, false, 0, Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(1, "split")
			for _, m := range tc.msgs {
				f.add(m)
				f.t++
			}
			s := New()
			s.ApplyAll(f.evs)
			a := s.Processes()[0].Anatomy
			if a == nil {
				t.Fatal("no anatomy")
			}
			if (a.Saved != nil) != tc.split || a.SavedActivations != tc.total ||
				(tc.split && a.SavedStep != tc.step) {
				t.Errorf("saved %v at step %d of %v, want %v at step %d of %v",
					a.Saved != nil, a.SavedStep, a.SavedActivations, tc.split, tc.step, tc.total)
			}
		})
	}
}
