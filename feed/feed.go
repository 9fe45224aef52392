// Package feed joins vramscope's event sources into one stream. The socket
// server, the NVML poller, the demo and the replay reader put events in from
// their own goroutines; the feed tees every event into the recording when
// one is open and hands its consumer (the TUI, or a headless loop) all
// pending events at once, so the consumer sees one coalesced batch per call.
package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// Writer is where recorded events go (record.Writer in production).
type Writer interface {
	Write(session.Event) error
	Close() error
}

// Opener creates a Writer for a path. begins says what the recording
// holds when it starts mid-session ("" when it starts with the session),
// for the file's header (a recording started with r said
// nothing of the minutes before it).
type Opener func(path, begins string) (Writer, error)

// ErrNoOpener is returned by Start when the feed cannot record.
var ErrNoOpener = errors.New("recording is not available here")

// DefaultLimit is how many events may wait for a slow consumer: at most
// about 45 MB of hook messages (a 64 KiB line each is the worst case of a
// message, a few hundred bytes the usual one).
const DefaultLimit = 1 << 16

// keepCap is the largest batch buffer kept for reuse once a burst is over:
// a flood's buffers go back to the garbage collector.
const keepCap = 1 << 14

// Feed is safe for concurrent use by any number of producers and one
// consumer.
type Feed struct {
	mu       sync.Mutex
	pending  []session.Event
	spare    []session.Event
	ready    chan struct{}
	limit    int
	overflow uint64

	now      func() time.Time
	hellos   map[uint64]*ipc.Message // the hello of every open connection
	lastSeq  map[uint64]uint64       // and the newest seq it sent
	hist     history                 // what a recording started later writes first
	open     Opener
	rec      Writer
	recPath  string
	recErr   error
	recCount uint64
	taps     []func(session.Event) // WithTap, in order
	rejected uint64                // bad lines, each counted though reports are limited
	refused  uint64                // connections the server refused (its limit)
}

// New returns an empty feed.
func New(opts ...Option) *Feed {
	f := &Feed{
		ready: make(chan struct{}, 1), limit: DefaultLimit, now: time.Now,
		hellos: map[uint64]*ipc.Message{}, lastSeq: map[uint64]uint64{},
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Put adds one event.
func (f *Feed) Put(ev session.Event) {
	f.mu.Lock()
	f.track(ev)
	f.record(ev)
	f.hist.keep(ev)
	for _, tap := range f.taps {
		tap(ev)
	}
	if len(f.pending) >= f.limit {
		f.skipOldest()
	}
	f.pending = append(f.pending, ev)
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// skipOldest drops the oldest half of the pending events when the consumer
// stopped taking them, and puts in their place what the consumer needs to
// tell this from loss: per connection, its hello if it was among them and
// a NoteSkip with the newest seq skipped and the count. A store counted
// the skipped messages as lost, though a recording had every one (issue
// 22, finding 5). f.mu is held.
func (f *Feed) skipOldest() {
	n := len(f.pending) / 2
	type skip struct {
		seq, count uint64
		hello      *ipc.Message
		at         time.Time
	}
	skips := map[uint64]*skip{}
	var order []uint64
	synthetic := 0
	for _, ev := range f.pending[:n] {
		k := skips[ev.Conn] // connection 0: NVML samples
		if k == nil {
			k = &skip{}
			skips[ev.Conn] = k
			order = append(order, ev.Conn)
		}
		k.at = ev.At
		if ev.Note != nil && ev.Note.Kind == session.NoteSkip { // an earlier skip
			k.count += ev.Note.Count
			k.seq = max(k.seq, ev.Note.Seq)
			synthetic++
			continue
		}
		k.count++
		switch {
		case ev.Msg != nil && ev.Msg.Type == ipc.TypeHello:
			k.hello, k.seq = ev.Msg, 0
		case ev.Msg != nil:
			k.seq = max(k.seq, ev.Msg.Seq)
		case ev.Note != nil && ev.Note.Kind == session.NoteDisconnect:
			k.hello = nil // the connection is over: nothing to resume
		}
	}
	var head []session.Event
	for _, c := range order {
		k := skips[c]
		if k.hello != nil {
			head = append(head, session.Event{At: k.at, Conn: c, Msg: k.hello})
		}
		head = append(head, session.Event{At: k.at, Conn: c, Note: &session.Note{
			Kind: session.NoteSkip, Seq: k.seq, Count: k.count,
			Text: fmt.Sprintf("connection %d: the monitor's view skipped %d events (it fell behind; a recording has them)", c, k.count),
		}})
	}
	rest := f.pending[n:]
	out := make([]session.Event, 0, len(head)+len(rest)+1)
	out = append(append(out, head...), rest...)
	clear(f.pending) // let the discarded events be collected
	f.pending = out
	f.overflow += uint64(n - synthetic)
}

// track keeps what a recording started later needs to make sense on its
// own: each open connection's hello and newest seq. f.mu is held.
func (f *Feed) track(ev session.Event) {
	switch {
	case ev.Msg != nil && ev.Msg.Type == ipc.TypeHello:
		f.hellos[ev.Conn], f.lastSeq[ev.Conn] = ev.Msg, 0
	case ev.Msg != nil:
		f.lastSeq[ev.Conn] = ev.Msg.Seq
	case ev.Note != nil && ev.Note.Kind == session.NoteDisconnect:
		delete(f.hellos, ev.Conn)
		delete(f.lastSeq, ev.Conn)
	}
}

// Deliver turns what the socket server reports into events. It is an
// ipc.Server delivery callback.
func (f *Feed) Deliver(d ipc.Delivery) {
	ev := session.Event{At: d.At, Conn: d.Conn}
	switch d.Kind {
	case ipc.Received:
		ev.Msg = d.Msg
	case ipc.Rejected:
		f.mu.Lock()
		f.rejected += 1 + d.Skipped
		f.mu.Unlock()
		ev.Note = &session.Note{Kind: session.NoteError, Text: fmt.Sprintf("connection %d: %v", d.Conn, d.Err)}
	case ipc.Refused:
		f.mu.Lock()
		f.refused++
		f.mu.Unlock()
		ev.Note = &session.Note{Kind: session.NoteRefused, Text: d.Err.Error()}
	case ipc.Connected:
		ev.Note = &session.Note{Kind: session.NoteConnect, Text: fmt.Sprintf("connection %d opened", d.Conn)}
	case ipc.Disconnected:
		text := fmt.Sprintf("connection %d closed", d.Conn)
		if d.Err != nil {
			text += ": " + d.Err.Error()
		}
		ev.Note = &session.Note{Kind: session.NoteDisconnect, Text: text}
	default:
		return
	}
	f.Put(ev)
}

// Samples turns one NVML round into events. It is a probe poller callback;
// the samples are copied, so the caller may reuse its slice. The events are
// stamped with the time they are received, like hook messages; the store
// places each sample on the timeline by its own time.
func (f *Feed) Samples(ss []probe.Sample) {
	now := f.now()
	for i := range ss {
		s := ss[i]
		if s.Processes != nil {
			s.Processes = append([]probe.Process{}, s.Processes...)
		}
		f.Put(session.Event{At: now, GPU: &s})
	}
}

// Next blocks until at least one event is pending or ctx is done, then
// returns every pending event. The returned slice is the caller's until its
// next call to Next.
func (f *Feed) Next(ctx context.Context) ([]session.Event, error) {
	for {
		f.mu.Lock()
		if len(f.pending) > 0 {
			out := f.pending
			// The previous batch is the consumer's no more: drop its
			// references, and the buffer itself if a burst grew it.
			clear(f.spare)
			if cap(f.spare) > keepCap {
				f.spare = nil
			}
			f.pending, f.spare = f.spare[:0], out
			f.mu.Unlock()
			return out, nil
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.ready:
		}
	}
}

// Overflow is the number of events discarded because the consumer fell
// more than the pending limit behind.
func (f *Feed) Overflow() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.overflow
}

// Rejected is the number of bad lines the socket server skipped, every one
// counted, though it reports them at a limited rate.
func (f *Feed) Rejected() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rejected
}

// Refused is the number of connections the socket server refused because
// it was full: their hooks' data never arrived.
func (f *Feed) Refused() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}
