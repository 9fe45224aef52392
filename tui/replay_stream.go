package tui

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/session"
)

// ReplayStream yields a recording's events in order, already paced for
// replay (At never decreases). Next returns io.EOF after the last event.
type ReplayStream interface {
	Next() (session.Event, error)
	Close() error
}

// A streamed replay holds a window of the recording, not all of it: a
// reader goroutine decodes chunks of replayChunk events, at most
// streamAhead of them wait in its channel, and the model asks for the next
// chunk only while fewer than lowWater events wait unapplied. Memory is
// that window plus the store, whatever the recording's length.
const (
	replayChunk = 2048
	streamAhead = 2
	lowWater    = 4 * replayChunk
)

// replayMsg is what a reader goroutine hands the model: the next events
// and, after a seek back, the store it rebuilt up to the target.
type replayMsg struct {
	gen    int // the stream it belongs to; older ones are ignored
	store  *session.Store
	exits  *exitLog // the goodbyes the rebuilt store applied
	evs    []session.Event
	end    bool // the recording ends after evs
	err    error
	closed bool // the goroutine stopped (cancelled): no more from it
}

// ReplayEnder is a ReplayStream that can find the paced time of the
// recording's last event more cheaply than by reading every event: the
// background pass for the header's length and the seek limit asks it
// instead when the stream open returns has it. It must return what
// reading to the end would find, and stop early with ctx's error.
type ReplayEnder interface {
	ReplayEnd(ctx context.Context) (time.Time, error)
}

// replayEndMsg is the end of the recording, from a scan in the background,
// for the header's length and the seek limit.
type replayEndMsg struct{ end time.Time }

// rebuild is the target of a seek back, shared with the goroutine that
// replays the recording into a fresh store up to it.
type rebuild struct {
	mu      sync.Mutex
	until   time.Time // apply events at or before this
	reached time.Time // the newest event applied
	handed  bool      // the store has been handed over: until is final
}

// take reports whether an event at at belongs to the rebuilt store.
func (b *rebuild) take(at time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at.After(b.until) {
		b.handed = true
		return false
	}
	b.reached = at
	return true
}

// retarget moves the target to t when the rebuild has not passed it yet.
func (b *rebuild) retarget(t time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handed || t.Before(b.reached) {
		return false
	}
	b.until = t
	return true
}

// replayStream is the model's side of a streamed replay: the open
// function, the current reader goroutine and whether a read is pending.
type replayStream struct {
	open    func() (ReplayStream, error)
	ctx     context.Context // the model's: cancelled on quit
	gen     int
	ch      chan replayMsg
	cancel  context.CancelFunc
	rb      *rebuild // a seek back under way
	reading bool
	scanned bool
}

// start replaces the reader goroutine by one that reads from the first
// event; with rb it first replays up to rb.until into a fresh store.
func (s *replayStream) start(rb *rebuild) {
	if s.cancel != nil {
		s.cancel()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.gen++
	s.ch, s.cancel, s.rb, s.reading = make(chan replayMsg, streamAhead), cancel, rb, false
	go readStream(ctx, s.open, s.gen, s.ch, rb)
}

// readStream is the reader goroutine: it owns the store it rebuilds until
// it hands it over, and closes ch when it stops.
func readStream(ctx context.Context, open func() (ReplayStream, error), gen int, ch chan<- replayMsg, rb *rebuild) {
	defer close(ch)
	send := func(m replayMsg) bool {
		m.gen = gen
		select {
		case ch <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	src, err := open()
	if err != nil {
		send(replayMsg{err: err, end: true})
		return
	}
	defer src.Close()
	var st *session.Store
	var ex *exitLog
	if rb != nil {
		st, ex = session.New(session.WithLiveBounds()), newExitLog()
	}
	buf := make([]session.Event, 0, replayChunk)
	for n := 1; ; n++ {
		ev, err := src.Next()
		if err != nil {
			m := replayMsg{store: st, exits: ex, evs: buf, end: true}
			if !errors.Is(err, io.EOF) {
				m.err = err
			}
			send(m)
			return
		}
		if st != nil && rb.take(ev.At) {
			st.Apply(ev)
			if ev.IsGoodbye() || ev.HelloSession() != "" {
				ex.note(st, []session.Event{ev})
			}
			if n%replayChunk == 0 && ctx.Err() != nil {
				return
			}
			continue
		}
		buf = append(buf, ev)
		if len(buf) == replayChunk || st != nil {
			if !send(replayMsg{store: st, exits: ex, evs: buf}) {
				return
			}
			st, ex, buf = nil, nil, make([]session.Event, 0, replayChunk)
		}
	}
}

// read waits for the reader goroutine's next message.
func (s *replayStream) read() tea.Cmd {
	ch, gen := s.ch, s.gen
	return func() tea.Msg {
		if m, ok := <-ch; ok {
			return m
		}
		return replayMsg{gen: gen, closed: true}
	}
}

// scan finds the recording's end once: from the stream's ReplayEnd when
// it has one, else by reading every event.
func (s *replayStream) scan() tea.Cmd {
	ctx, open := s.ctx, s.open
	return func() tea.Msg {
		src, err := open()
		if err != nil {
			return nil
		}
		defer src.Close()
		if e, ok := src.(ReplayEnder); ok {
			end, err := e.ReplayEnd(ctx)
			if err != nil {
				return nil // cancelled, or unreadable: the stream's own end will do
			}
			return replayEndMsg{end: end}
		}
		var end time.Time
		for n := 1; ; n++ {
			ev, err := src.Next()
			if err != nil {
				break
			}
			end = ev.At
			if n%replayChunk == 0 && ctx.Err() != nil {
				return nil
			}
		}
		return replayEndMsg{end: end}
	}
}

// replayCmd starts the reader of a replay and asks for the next chunk
// when few events wait; nil outside replay.
func (m *Model) replayCmd() tea.Cmd {
	r := m.replay
	if r == nil {
		return nil
	}
	s := r.str
	var cmds []tea.Cmd
	if s.ch == nil {
		s.start(nil)
	}
	if !s.scanned {
		s.scanned = true
		cmds = append(cmds, s.scan())
	}
	if !s.reading && !r.ended && (s.rb != nil || len(r.events)-r.next < lowWater) {
		s.reading = true
		cmds = append(cmds, s.read())
	}
	return tea.Batch(cmds...)
}

// onReplay takes a reader goroutine's message: a rebuilt store replaces
// the one shown, events join the window, those already due are applied.
func (m *Model) onReplay(msg replayMsg) tea.Cmd {
	r := m.replay
	if r == nil || msg.gen != r.str.gen {
		return nil
	}
	s := r.str
	s.reading = false
	if msg.closed {
		return nil
	}
	if msg.store != nil {
		m.store, s.rb = msg.store, nil
		if msg.exits != nil {
			*m.exits = *msg.exits // the log the replay clock shares
		}
	}
	r.push(msg.evs)
	if msg.end {
		r.ended = true
		if r.end.IsZero() || r.end.Before(r.seen) {
			r.end = r.seen
		}
	}
	if msg.err != nil {
		m.srcErr = "replay: " + msg.err.Error()
		m.logf("replay: %v", msg.err)
	}
	if s.rb == nil {
		r.applyUntil(m.store, r.now)
	}
	m.dirty = true
	return tea.Batch(m.replayCmd(), m.armFrame())
}

// onReplayEnd records the recording's end found by the scan.
func (m *Model) onReplayEnd(msg replayEndMsg) {
	if r := m.replay; r != nil && !msg.end.IsZero() {
		r.end = msg.end
		m.dirty = true
	}
}
