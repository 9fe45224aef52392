package diff_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/session"
)

func load(t *testing.T, name string) *session.Store {
	t.Helper()
	s, _, _, err := export.Load("../testdata/h100/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDiffSameScriptTwice compares s001 with the first process of live:
// the same script at the same size (seed001.py, 73.3 M parameters) on the
// same H100, recorded twice. The deterministic phases peak at the same
// bytes, and the model's own layers do not move.
func TestDiffSameScriptTwice(t *testing.T) {
	res := diff.Compare(load(t, "s001.jsonl.gz"), load(t, "live.jsonl.gz"), "s001", "live")
	if len(res.Pairs) != 1 || res.UnpairedB != 1 {
		t.Fatalf("%d pairs, %d unpaired in B; want s001's process paired with live's first", len(res.Pairs), res.UnpairedB)
	}
	p := res.Pairs[0]
	if p.A.PID != 618 || p.B.PID != 692 || p.CommonSteps != 6 {
		t.Fatalf("paired pid %d with %d over %d steps", p.A.PID, p.B.PID, p.CommonSteps)
	}
	for _, ph := range p.Phases {
		if ph.Phase == "zero_grad" || ph.Phase == "forward" || ph.Phase == "loss" {
			// Phase peaks below an earlier high are lower bounds in both
			// (hook 0.1.0): equal, but no change is stated.
			d := ph.PeakAllocated
			if c := d.Change; d.A != d.B || c != nil && *c != 0 || c == nil && !(d.ABound && d.BBound) {
				t.Errorf("%s peak allocated %+v between two identical runs", ph.Phase, d)
			}
		}
	}
	if c := p.Steady.Peak.Change; c == nil || *c != 0 {
		t.Errorf("session peak changed by %v", c)
	}
	// Both needs are step 1's 4309 MiB, inferred: a change of 0 is stated,
	// and the text says how each was found.
	if c := p.Steady.Allocated.Change; c == nil || *c != 0 {
		t.Errorf("steady need changed by %v", c)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "A's inferred from step 1") || !strings.Contains(text.String(), "≥3393") {
		t.Errorf("the text hides how its figures are known:\n%s", text.String())
	}
	for _, l := range []string{"weights", "gradients", "optimizer state"} {
		if slices.Contains(p.Moved, l) {
			t.Errorf("%s moved between identical runs: %v", l, p.Moved)
		}
	}
}

// TestDiffHalfScale compares the two processes of live: seed001.py at full
// size and at --scale 0.5 (hidden 500 instead of 1000). Parameters scale
// with hidden², so weights, gradients and Adam's state shrink about 4×,
// and every phase peaks lower.
func TestDiffHalfScale(t *testing.T) {
	live := load(t, "live.jsonl.gz")
	ps := live.Processes()
	p := diff.ComparePair(live, ps[0], live, ps[1])
	if p.CommonSteps != 40 {
		t.Fatalf("%d common steps, want the smaller run's 40", p.CommonSteps)
	}
	for _, ph := range p.Phases {
		d := ph.PeakAllocated
		if c := d.Change; c != nil && *c >= 0 || c == nil && !(d.ABound || d.BBound) || d.B >= d.A {
			t.Errorf("%s: peak allocated %+v, want a drop (no change stated beside a bound)", ph.Phase, d)
		}
	}
	for _, l := range p.Layers {
		if l.Name != "weights" {
			continue
		}
		if r := float64(l.A) / float64(l.B); r < 3.5 || r > 4.5 {
			t.Errorf("weights %d → %d: ratio %.2f, want about 4", l.A, l.B, r)
		}
	}
	for _, l := range []string{"weights", "gradients", "optimizer state", "activations"} {
		if !slices.Contains(p.Moved, l) {
			t.Errorf("%s not among the moved layers %v", l, p.Moved)
		}
	}
	if c := p.Steady.Allocated.Change; c == nil || *c >= 0 {
		t.Errorf("steady peak change %v, want a drop", c)
	}
	// B − A the other way round is the opposite change.
	q := diff.ComparePair(live, ps[1], live, ps[0])
	if *q.Steady.Allocated.Change != -*p.Steady.Allocated.Change {
		t.Errorf("swapped sides: %d, want %d", *q.Steady.Allocated.Change, -*p.Steady.Allocated.Change)
	}
	var text bytes.Buffer
	res := diff.Result{Schema: diff.Schema, A: "a", B: "b", Pairs: []diff.Pair{p}}
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pid 692 (60 steps", "pid 728 (40 steps", "steady-state peak", "layers that moved", "weights 280 MiB → 70 MiB"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestDiffJSONNullsUnknown checks the JSON: a change is null, not 0, when
// a side has no figure (the OOM run has NVML per process, the small
// fixture only the device: no non-PyTorch figure).
func TestDiffJSONNullsUnknown(t *testing.T) {
	small, _, _, err := export.Load("../testdata/recordings/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	res := diff.Compare(load(t, "oom.jsonl.gz"), small, "oom", "small")
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Schema string `json:"schema"`
		Pairs  []struct {
			Layers []struct {
				Name   string `json:"name"`
				B      *int64 `json:"b"`
				Change *int64 `json:"change"`
			} `json:"layers"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Schema != diff.Schema || len(got.Pairs) != 1 {
		t.Fatalf("schema %q, %d pairs", got.Schema, len(got.Pairs))
	}
	for _, l := range got.Pairs[0].Layers {
		if l.Name == "non-PyTorch" && (l.B != nil || l.Change != nil) {
			t.Fatalf("layer without NVML on B: b %v change %v, want null", l.B, l.Change)
		}
	}
}
