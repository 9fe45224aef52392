package record

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
	"github.com/vramscope/vramscope/session"
)

// Writer appends events to a recording. It is safe for concurrent use.
// Buffered events reach the operating system at least every flush
// interval (default 1 s), by a background goroutine and on Write, so a
// killed monitor loses at most about that much and the file still reads
// (with gzip too: each flush is a gzip sync flush).
type Writer struct {
	path      string
	interval  time.Duration
	overwrite bool
	gzip      *bool
	tick      <-chan time.Time
	now       func() time.Time

	mu        sync.Mutex
	f         *os.File
	file      countingWriter
	gz        *gzip.Writer
	bw        *bufio.Writer
	buf       []byte
	counters  Counters
	dirty     bool
	lastFlush time.Time
	err       error // sticky: the first write or flush failure
	closed    bool

	stop, done chan struct{}
}

// Counters are a Writer's running totals, for the one-line summary of
// `vramscope record`.
type Counters struct {
	// Events is the number of events written (the header not counted).
	Events uint64
	// Bytes is the uncompressed size written so far, header included.
	Bytes int64
	// FileBytes is what has reached the file so far (compressed with gzip).
	FileBytes int64
}

// countingWriter counts the bytes that reach the file.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Create starts a recording at path and writes its header, which reaches
// the OS at once. A ".gz" suffix means gzip (see WithGzip). Create refuses
// an existing file unless WithOverwrite is given. Header.Format, Version
// and, when zero, Created are filled in; an empty Source means "live".
func Create(path string, h Header, opts ...Option) (*Writer, error) {
	w := &Writer{path: path, interval: DefaultFlushInterval, now: time.Now}
	for _, o := range opts {
		o(w)
	}
	h.Format, h.Version = FormatMajor, FormatVersion
	if h.Created.IsZero() {
		h.Created = w.now().UTC().Truncate(time.Second)
	}
	if h.Source == "" {
		h.Source = SourceLive
	}
	if h.Argv == nil {
		h.Argv = []string{}
	}
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode recording header: %w", err)
	}
	how := safefs.Exclusive
	if w.overwrite {
		how = safefs.Truncate
	}
	f, err := safefs.OpenFile(path, how, 0o600) // like the socket: argv and host are private
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create recording %s: the file exists; choose another name or remove it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("create recording %s: %w", path, pathless(err))
	}
	w.f = f
	w.file.w = f
	var out io.Writer = &w.file
	if w.gzip != nil && *w.gzip || w.gzip == nil && strings.HasSuffix(path, ".gz") {
		// The fastest level: the monitor compresses every event as it
		// comes, beside the training it watches (docs/format.md, "Compression").
		w.gz, _ = gzip.NewWriterLevel(&w.file, gzip.BestSpeed) // a valid level: no error
		out = w.gz
	}
	w.bw = bufio.NewWriterSize(out, 64<<10)
	w.bw.Write(append(head, '\n'))
	w.counters.Bytes = int64(len(head) + 1)
	w.dirty = true
	if err := w.flushLocked(); err != nil {
		f.Close()
		return nil, err
	}
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.flusher()
	return w, nil
}

// Path returns the recording's path.
func (w *Writer) Path() string { return w.path }

// flusher hands buffered events to the OS on every tick.
func (w *Writer) flusher() {
	defer close(w.done)
	tick := w.tick
	if tick == nil {
		t := time.NewTicker(w.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-w.stop:
			return
		case <-tick:
			w.mu.Lock()
			if !w.closed {
				w.flushLocked()
			}
			w.mu.Unlock()
		}
	}
}

// Write appends one event. It fails on an event that carries not exactly
// one of Msg, GPU and Note (nothing is written), and, from the first I/O
// failure on, on every call.
func (w *Writer) Write(e session.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write recording %s: writer closed", w.path)
	}
	if w.err != nil {
		return w.err
	}
	var err error
	w.buf, err = appendEvent(w.buf[:0], e)
	if err != nil {
		return fmt.Errorf("write recording %s: %w", w.path, err)
	}
	if _, err := w.bw.Write(w.buf); err != nil {
		w.err = fmt.Errorf("write recording %s: %w", w.path, err)
		return w.err
	}
	w.counters.Events++
	w.counters.Bytes += int64(len(w.buf))
	w.dirty = true
	if w.now().Sub(w.lastFlush) >= w.interval {
		return w.flushLocked()
	}
	return nil
}

// flushLocked pushes buffered bytes through gzip (a sync flush) to the OS.
func (w *Writer) flushLocked() error {
	if w.err != nil || !w.dirty {
		return w.err
	}
	err := w.bw.Flush()
	if err == nil && w.gz != nil {
		err = w.gz.Flush()
	}
	if err != nil {
		w.err = fmt.Errorf("flush recording %s: %w", w.path, err)
		return w.err
	}
	w.dirty = false
	w.lastFlush = w.now()
	return nil
}

// Err is the first write or flush failure (a full disk), nil while the
// recording is healthy. The background flush can fail with no Write to
// report it; a caller that polls Err learns of it within a flush interval.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Flush hands buffered events to the OS now.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// Counters returns the running totals.
func (w *Writer) Counters() Counters {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counters
	c.FileBytes = w.file.n
	return c
}

// Close flushes, ends the gzip stream and closes the file. Calling it again
// returns nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done

	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.flushLocked()
	if w.gz != nil && err == nil {
		if cerr := w.gz.Close(); cerr != nil {
			err = fmt.Errorf("finish gzip stream of %s: %w", w.path, cerr)
		}
	}
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close recording %s: %w", w.path, cerr)
	}
	return err
}

// pathless is err without the *fs.PathError that repeats the path the
// message already names ("create recording X: open X: ..." said X twice,
// and a caller's wrap a third time). errors.Is still matches
// (fs.ErrPermission, fs.ErrNotExist): the cause is the same errno.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
