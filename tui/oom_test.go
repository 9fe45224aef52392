package tui

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// The real H100 out-of-memory run (testdata/h100/oom.jsonl.gz): once the
// process has gone, the banner says where it ended and that it likely ran
// out of memory — the diagnosis cache is refreshed by the end, not only by
// a new step.
func TestBannerSaysTheRunRanOutOfMemory(t *testing.T) {
	evs := recording(t, "../testdata/h100/oom.jsonl.gz")
	m := live(t, evs, 200, 60)
	if v := m.View(); !strings.Contains(v, "ended abruptly in backward of step 21: likely out of memory") {
		t.Fatalf("the view does not say it ran out of memory:\n%s", v)
	}
}

// The cached diagnosis is made again when the process ends, though no step
// ended since.
func TestDiagnosisCacheFollowsTheEnd(t *testing.T) {
	evs := demoEvents(t, "steady", 8, 1)
	s := session.New()
	s.ApplyAll(evs)
	p := s.Processes()[0]
	var c diagCache
	if d := c.get(s, p); d.End != nil && d.End.Abrupt {
		t.Fatalf("ended before the end: %+v", d.End)
	}
	s.Apply(session.Event{At: s.Last(), Conn: 1, Note: &session.Note{Kind: session.NoteDisconnect, Text: "closed"}})
	if p.End == nil {
		t.Skip("the demo stream already said goodbye")
	}
	if d := c.get(s, p); d.End == nil {
		t.Fatalf("the cache kept the diagnosis made before the end")
	}
}
