package record

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vramscope/vramscope/session"
)

// OpenReplay opens a recording for a streamed replay: it checks the header
// now, and returns a function that reads the events from the first one,
// paced by the timeline, each time the replay asks (to play, to find the
// end, to seek back). Nothing is held beyond what the replay keeps. The
// reader's warnings (skipped or torn lines) are collected once, by the
// first read that reaches the end.
func OpenReplay(path string) (Header, func() (*PacedReader, error), *ReplayWarnings, error) {
	r, err := Open(path)
	if err != nil {
		return Header{}, nil, nil, err
	}
	hdr := r.Header()
	r.Close()
	warned := &ReplayWarnings{}
	open := func() (*PacedReader, error) {
		r, err := Open(path)
		if err != nil {
			return nil, err
		}
		return &PacedReader{r: r, path: path, warned: warned}, nil
	}
	return hdr, open, warned, nil
}

// PacedReader is a Reader whose events are paced for replay: the
// pacing (session.Pacer) lives next to the reader it paces.
type PacedReader struct {
	r      *Reader
	pacer  session.Pacer
	path   string
	warned *ReplayWarnings
}

// Next returns the next event, paced; io.EOF after the last.
func (p *PacedReader) Next() (session.Event, error) {
	ev, err := p.r.Next()
	if err == io.EOF {
		p.warned.set(p.r.Warnings())
		return ev, io.EOF
	}
	if err != nil {
		return ev, fmt.Errorf("read %s: %w", p.path, err)
	}
	if ev.Msg != nil {
		ev.Msg.Raw = nil // only a recorder needs the raw line
	}
	p.pacer.Pace(&ev)
	return ev, nil
}

// Close closes the file.
func (p *PacedReader) Close() error { return p.r.Close() }

// ReplayEnd (tui.ReplayEnder) finds the recording's paced end with PacedEnd, which
// reads only the times pacing needs: the replay's pass for its length no
// longer decodes every event.
func (p *PacedReader) ReplayEnd(ctx context.Context) (time.Time, error) {
	return PacedEnd(ctx, p.path)
}

// ReplayWarnings are the reader's warnings of a whole pass over a
// recording, shown once the TUI has given the terminal back.
type ReplayWarnings struct {
	mu   sync.Mutex
	done bool
	list []string
}

func (w *ReplayWarnings) set(list []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.done, w.list = true, list
	}
}

// Lines returns the warnings, nil before a read has reached the end.
func (w *ReplayWarnings) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.list
}
