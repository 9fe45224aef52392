package ipc

import (
	"strings"
	"testing"
)

// The protocol additions (docs/protocol.md: input on forward begins, the
// anatomy's freshness fields, oom, goodbye "error") decode from their
// shared fixture, also by the fast path, and their bad values are refused.
func TestDecodeAdditions(t *testing.T) {
	lines := fixtureLines(t, "additions.jsonl")
	var got []*Message
	for i, l := range lines {
		m, err := Decode(l)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		got = append(got, m)
	}
	if in := got[0].Input; in == nil || in.Batch == nil || *in.Batch != 32 || in.Tokens == nil || *in.Tokens != 16384 {
		t.Errorf("input %+v", got[0].Input)
	}
	var fast Message
	if !fastDecode(lines[0], &fast, nil) || fast.Input == nil || *fast.Input.Batch != 32 {
		t.Errorf("the fast path does not take a forward begin with its input")
	}
	if in := got[1].Input; in == nil || *in.Batch != 64 || in.Tokens != nil {
		t.Errorf("input with null tokens %+v", got[1].Input)
	}
	a := got[2]
	if *a.Tokens != 32768 || *a.ActivationsStep != 2 || *a.ActivationsBatch != 32 || *a.ActivationsTokens != 16384 || a.ActivationsSource != "scaled" {
		t.Errorf("anatomy %+v", a)
	}
	if b := got[3]; b.Tokens != nil || b.ActivationsStep != nil || b.ActivationsSource != "" {
		t.Errorf("null anatomy fields %+v", b)
	}
	o := got[4]
	if o.Type != TypeOOM || o.Step != 21 || o.Phase != "backward" || *o.Requested != 4<<30 || o.Mem.OOMs != 1 || *o.DeviceTotal != 85520809984 {
		t.Errorf("oom %+v", o)
	}
	if got[6].Reason != "error" {
		t.Errorf("goodbye %+v", got[6])
	}
	// Exact peaks: the capability, a breakdown edge (no span) and
	// a plain step's single read with and without same_as, by both paths.
	if h := got[7].Hook; h == nil || !h.ExactPeaks || h.ResetPeaks {
		t.Errorf("exact_peaks hello %+v", got[7].Hook)
	}
	if b := got[8]; b.Span != "" || b.SameAs != nil || b.Mem == nil {
		t.Errorf("breakdown edge %+v", b)
	}
	if p := got[9]; p.Span != SpanStep || p.SameAs == nil || *p.SameAs != 2 || p.Mem.MaxAllocated != 4518008832 {
		t.Errorf("plain step %+v", p)
	}
	if p := got[10]; p.Span != SpanStep || p.SameAs != nil {
		t.Errorf("plain step that moved %+v", p)
	}
	for _, i := range []int{8, 9, 10} {
		var fast Message
		if !fastDecode(lines[i], &fast, nil) {
			t.Errorf("line %d: the fast path does not take it", i+1)
		} else if fast.Span != got[i].Span || (fast.SameAs == nil) != (got[i].SameAs == nil) ||
			(fast.SameAs != nil && *fast.SameAs != *got[i].SameAs) {
			t.Errorf("line %d: fast path %+v, encoding/json %+v", i+1, fast, *got[i])
		}
	}
	// An evaluation that ran with gradients enabled says so at its end.
	if e := got[11]; !e.Grad || !e.User || e.Edge != EdgeEnd || e.Name != "eval" {
		t.Errorf("eval end with grad %+v", e)
	}
	if got[8].Grad {
		t.Errorf("grad on an edge without the field")
	}
	if fast = (Message{}); !fastDecode(lines[11], &fast, nil) || !fast.Grad {
		t.Errorf("the fast path does not take an eval end with its grad: %+v", fast)
	}
	// A phase an error unwound says so at its end, by both paths.
	if e := got[12]; e.Failed != FailedOOM || e.User || e.Edge != EdgeEnd || e.Name != "loss" {
		t.Errorf("failed loss end %+v", e)
	}
	if got[8].Failed != "" {
		t.Errorf("failed on an edge without the field")
	}
	if fast = (Message{}); !fastDecode(lines[12], &fast, nil) || fast.Failed != FailedOOM {
		t.Errorf("the fast path does not take a failed end: %+v", fast)
	}
	// A skipped step's closing read on the next step's first begin edge.
	if b := got[13]; b.Closes == nil || b.Closes.Step != 5 || b.Closes.SameAs == nil || *b.Closes.SameAs != 2 ||
		b.Edge != EdgeBegin || b.Mem == nil || b.Span != "" {
		t.Errorf("closes on a begin %+v", b)
	}
	if c := got[13].Closes; c.Held != nil {
		t.Errorf("closes without held: %v", *c.Held)
	}
	if c := got[14].Closes; c == nil || c.Step != 9 || c.SameAs != nil || c.Held == nil || *c.Held {
		t.Errorf("closes of a step whose held memory is unknown %+v", c)
	}
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6, 8, 12} {
		if got[i].Closes != nil {
			t.Errorf("line %d: closes without the field", i+1)
		}
	}
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6} {
		if got[i].Hook != nil && got[i].Hook.ExactPeaks {
			t.Errorf("line %d: exact_peaks without the field", i+1)
		}
	}
	for _, c := range []struct{ line, err string }{
		{`{"v":1,"type":"phase","seq":1,"t":1,"name":"forward","step":0,"edge":"begin","input":{"batch":-1,"tokens":null}}`, "field input.batch: negative"},
		{`{"v":1,"type":"anatomy","seq":1,"t":1,"step":0,"activations_source":"guessed"}`, "field activations_source"},
		{`{"v":1,"type":"anatomy","seq":1,"t":1,"step":0,"activations_step":-2}`, "field activations_step: negative"},
		{`{"v":1,"type":"oom","seq":1,"t":1,"step":0,"requested":-5}`, "field requested: negative"},
		{`{"v":1,"type":"oom","seq":1,"t":1,"step":-1}`, "field step: negative"},
		{`{"v":1,"type":"phase","seq":1,"t":1,"name":"forward","step":0,"edge":"end","grad":true}`, "field grad: only on a user phase's end edge"},
		{`{"v":1,"type":"phase","seq":1,"t":1,"name":"eval","step":0,"edge":"begin","user":true,"grad":true}`, "field grad: only on a user phase's end edge"},
		{`{"v":1,"type":"phase","seq":1,"t":1,"name":"forward","step":0,"edge":"begin","failed":"oom"}`, "field failed: only on an automatic phase's end edge"},
		{`{"v":1,"type":"phase","seq":1,"t":1,"name":"eval","step":0,"edge":"end","user":true,"failed":"oom"}`, "field failed: only on an automatic phase's end edge"},
		{`{"v":1,"type":"phase","seq":1,"t":1,"name":"loss","step":0,"edge":"end","failed":"boom"}`, `field failed: "oom" or "error"`},
	} {
		if _, err := Decode([]byte(c.line)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.line, err, c.err)
		}
	}
}

// The watch name (docs/protocol.md, "model") on automatic phases and
// anatomy decodes from the shared fixture, by the fast path too; a user
// phase carries none.
func TestDecodeModelName(t *testing.T) {
	lines := fixtureLines(t, "valid.jsonl")
	for _, i := range []int{1, 2, 6} {
		m, err := Decode(lines[i])
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if m.Model != "Net" {
			t.Errorf("line %d: model %q, want Net", i+1, m.Model)
		}
	}
	var fast Message
	if !fastDecode(lines[1], &fast, nil) || fast.Model != "Net" {
		t.Errorf("the fast path does not take a phase with its model: %q", fast.Model)
	}
	if m, err := Decode(lines[4]); err != nil || m.Model != "" || !m.User {
		t.Errorf("user phase: %+v %v", m, err)
	}
}
