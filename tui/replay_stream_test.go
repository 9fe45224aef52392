package tui

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/session"
)

// sliceStream is a ReplayStream over events in memory.
type sliceStream struct{ evs []session.Event }

func (s *sliceStream) Next() (session.Event, error) {
	if len(s.evs) == 0 {
		return session.Event{}, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

func (s *sliceStream) Close() error { return nil }

// streamModel builds a streamed replay of evs at 120×40 (with opts) and
// counts the times the recording is opened.
func streamModel(t *testing.T, evs []session.Event, opens *int, opts ...Option) Model {
	t.Helper()
	open := func() (ReplayStream, error) {
		*opens++
		return &sliceStream{evs: evs}, nil
	}
	m := New(append([]Option{WithReplayStream(open), WithClock(fixedClock(evs))}, opts...)...)
	m.Init()
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 120, Height: 40})
	return pump(t, m)
}

// pump delivers the reader goroutine's messages while the model waits for
// one, as the read command does, and checks the window stays bounded.
func pump(t *testing.T, m Model) Model {
	t.Helper()
	for m.replay != nil && m.replay.str.reading {
		select {
		case msg, ok := <-m.replay.str.ch:
			if !ok {
				t.Fatal("the reader stopped without an end")
			}
			m, _ = update(t, m, msg)
		case <-time.After(5 * time.Second):
			t.Fatal("no message from the reader in 5 s")
		}
		if held := len(m.replay.events); held > lowWater+replayChunk {
			t.Fatalf("the window holds %d events, more than %d", held, lowWater+replayChunk)
		}
	}
	return m
}

// playMax plays m to the end at max speed.
func playMax(t *testing.T, m Model) Model {
	t.Helper()
	m = press(t, m, "s", "s", "s")
	wall := time.Unix(0, 0)
	for i := 0; i < 10000 && !m.replay.done(); i++ {
		m, wall = frames(t, m, wall, 1, time.Second/15)
		m = pump(t, m)
	}
	if !m.replay.done() {
		t.Fatal("max speed did not reach the end")
	}
	return m
}

func stepsView(m Model) string {
	m.render() // the table's height follows the banner's: size it for this store
	return m.table.view(m.visibleSteps(m.process()), rowMarks{})
}

// upTo is a live model (120×40) of the events at or before at: what a
// replay at at must show.
func upTo(t *testing.T, evs []session.Event, at time.Time) Model {
	t.Helper()
	k := 0
	for k < len(evs) && !evs[k].At.After(at) {
		k++
	}
	return live(t, evs[:k], 120, 40)
}

// A streamed replay shows what the live view of the same events shows,
// over a recording many chunks long, while holding only a window of it
// (pump checks the window), and reads it once to play it once.
func TestStreamReplayPlaysEveryChunk(t *testing.T) {
	evs := demoEvents(t, "warmup", 300, 2)
	if len(evs) < 4*replayChunk {
		t.Fatalf("only %d events: too few to cross chunks", len(evs))
	}
	var opens int
	sm := playMax(t, streamModel(t, evs, &opens))
	lm := live(t, evs, 120, 40)
	for r := range lm.store.Processes() {
		if got, want := stepsView(sm), stepsView(lm); got != want {
			t.Fatalf("rank %d: streamed\n%s\nlive\n%s", r, got, want)
		}
		sm, lm = press(t, sm, "tab"), press(t, lm, "tab")
	}
	first, last := evs[0].At, evs[len(evs)-1].At
	if sm.replay.length() != last.Sub(first) || !sm.replay.now.Equal(last) {
		t.Errorf("streamed at %v of %v, want the end %v", sm.replay.now.Sub(first), sm.replay.length(), last.Sub(first))
	}
	if opens != 1 {
		t.Errorf("opened %d times to play once", opens)
	}
}

// Seeking back replays into a fresh store in the reader goroutine: Update
// keeps the old store until the new one is handed over, and the result is
// the live view of the events up to the target, across chunks and back to
// the start.
func TestStreamReplaySeekBack(t *testing.T) {
	evs := demoEvents(t, "warmup", 300, 2)
	var opens int
	sm := streamModel(t, evs, &opens)
	same := func(what string) {
		t.Helper()
		if got, want := stepsView(sm), stepsView(upTo(t, evs, sm.replay.now)); got != want {
			t.Fatalf("%s: at %v streamed\n%s\nlive\n%s", what, sm.replay.now.Sub(sm.replay.start), got, want)
		}
	}
	for i := 0; i < 6; i++ { // forward 90 s, well past the first chunks
		sm = pump(t, press(t, sm, "right"))
	}
	if sm.replay.now.Sub(sm.replay.start) != 90*time.Second {
		t.Fatalf("forward six quarters of 1 min: at %v", sm.replay.now.Sub(sm.replay.start))
	}
	same("forward")
	at := sm.replay.now
	old := sm.store
	sm = press(t, sm, "left")
	if !sm.replay.rebuilding() || sm.store != old {
		t.Fatal("a seek back should rebuild in the background and keep showing the old store")
	}
	if v := sm.View(); !strings.Contains(v, "seeking back") {
		t.Errorf("the header does not say it is seeking back:\n%s", firstLines(v, 1))
	}
	sm = press(t, sm, "left", "right", "left") // retargets while it rebuilds
	sm = pump(t, sm)
	if sm.replay.rebuilding() || sm.store == old {
		t.Fatal("the rebuilt store was not handed over")
	}
	if back := at.Sub(sm.replay.now); back != 30*time.Second {
		t.Fatalf("back, back, forward, back by 15 s: %v back, want 30s", back)
	}
	same("back")
	for i := 0; i < 8; i++ {
		sm = press(t, sm, "left")
	}
	sm = pump(t, sm)
	same("back to the start")
	if !sm.replay.now.Equal(sm.replay.start) {
		t.Errorf("at %v, want the start", sm.replay.now.Sub(sm.replay.start))
	}
	sm = playMax(t, sm)
	same("played to the end after seeking")
}

// The background scan finds the recording's end before the reader does,
// and a seek forward stops there.
func TestStreamReplayScanEnd(t *testing.T) {
	evs := demoEvents(t, "warmup", 2000, 1)
	var opens int
	sm := streamModel(t, evs, &opens)
	if sm.replay.ended || !sm.replay.end.IsZero() {
		t.Fatal("the reader read the whole recording ahead, or the end is known before any scan")
	}
	sm, _ = update(t, sm, sm.replay.str.scan()())
	if want := evs[len(evs)-1].At.Sub(evs[0].At); sm.replay.length() != want {
		t.Fatalf("length %v, want %v", sm.replay.length(), want)
	}
	sm = press(t, sm, "-", "-", "-", "-", "-", "-", "right", "right") // zoomed out to 2 h: 30 min a seek
	sm = pump(t, sm)
	if !sm.replay.now.Equal(evs[len(evs)-1].At) || !sm.replay.done() {
		t.Errorf("seek forward: at %v of %v, done %v", sm.replay.now.Sub(sm.replay.start), sm.replay.length(), sm.replay.done())
	}
}

// enderStream is a sliceStream that knows its end without being read.
type enderStream struct {
	sliceStream
	end   time.Time
	err   error
	nexts *int
}

func (s *enderStream) Next() (session.Event, error) {
	*s.nexts++
	return s.sliceStream.Next()
}

func (s *enderStream) ReplayEnd(ctx context.Context) (time.Time, error) { return s.end, s.err }

// TestScanAsksReplayEnd checks the pass for the recording's end takes it
// from a stream's ReplayEnd instead of reading the events, and sends no
// end when ReplayEnd fails.
func TestScanAsksReplayEnd(t *testing.T) {
	evs := []session.Event{{At: time.Unix(100, 0), Note: &session.Note{Text: "x"}}}
	end := time.Unix(200, 0)
	for _, tc := range []struct {
		err  error
		want tea.Msg
	}{
		{nil, replayEndMsg{end: end}},
		{context.Canceled, nil},
	} {
		nexts := 0
		s := &replayStream{ctx: context.Background(), open: func() (ReplayStream, error) {
			return &enderStream{sliceStream: sliceStream{evs: evs}, end: end, err: tc.err, nexts: &nexts}, nil
		}}
		if got := s.scan()(); got != tc.want {
			t.Errorf("ReplayEnd error %v: scan sent %#v, want %#v", tc.err, got, tc.want)
		}
		if nexts != 0 {
			t.Errorf("scan read %d events; ReplayEnd alone should do", nexts)
		}
	}
}
