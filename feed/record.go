package feed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// record writes ev to the open recording; f.mu is held. A failed write
// closes the recording and keeps the error for Err: the live view goes on.
func (f *Feed) record(ev session.Event) {
	if f.rec == nil {
		return
	}
	if err := f.rec.Write(ev); err != nil {
		f.fail(err)
		return
	}
	f.recCount++
}

// Start opens a recording at path; every event put from now on is written
// to it. Recording again while a recording is open is an error.
func (f *Feed) Start(path string) error {
	if f.open == nil {
		return ErrNoOpener
	}
	w, err := f.open(path, f.begins())
	if err != nil {
		return err // it names the path already
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rec != nil {
		_ = w.Close()
		return fmt.Errorf("already recording to %s", f.recPath)
	}
	f.rec, f.recPath, f.recErr, f.recCount = w, path, nil, 0
	// A recording started mid-session opens with the history the monitor
	// holds (history.go), so it stands on its own.
	f.writeHistory()
	return nil
}

// begins says what a recording started now holds: "" with no connection
// open (it starts with whatever comes), else which connections it joins
// and from which of their messages.
func (f *Feed) begins() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hellos) == 0 {
		return ""
	}
	conns := make([]uint64, 0, len(f.hellos))
	for c := range f.hellos {
		conns = append(conns, c)
	}
	slices.Sort(conns)
	parts := make([]string, 0, len(conns))
	for _, c := range conns {
		h := f.hellos[c]
		parts = append(parts, fmt.Sprintf("pid %d from its message %d", h.PID, f.lastSeq[c]+1))
	}
	return "mid-session: started at " + f.now().UTC().Format(time.RFC3339) + ", joining " + strings.Join(parts, ", ") +
		"; it opens with what the monitor held of before: each connection's first steps and its newest events (a resume note marks what it had let go)"
}

// restated is the hello a recording started mid-session opens with: the
// hook's hello with its t moved to the moment recording began. The hello's
// own t is when the hook started, minutes before; kept, it made the
// recording's timeline (replay, report) start there and play that time as
// an empty screen. The clock mapping and every other field,
// those this build does not know included, stay as the hook sent them.
func restated(h *ipc.Message, now time.Time) *ipc.Message {
	if h.Clock == nil {
		return h // its times fall back to the event's: now already
	}
	m := *h
	m.T = h.Clock.Mono + (float64(now.UnixNano())/1e9 - h.Clock.Wall)
	if m.T < h.T {
		return h // a clock that maps now before the hello: keep it as sent
	}
	m.Raw = nil
	if len(h.Raw) > 0 {
		var fields map[string]json.RawMessage
		if json.Unmarshal(h.Raw, &fields) == nil {
			if t, err := json.Marshal(m.T); err == nil {
				fields["t"] = t
				m.Raw, _ = json.Marshal(fields)
			}
		}
	}
	return &m
}

// Stop closes the open recording, if any.
func (f *Feed) Stop() error {
	f.mu.Lock()
	w, path := f.rec, f.recPath
	f.rec, f.recPath = nil, ""
	f.mu.Unlock()
	if w == nil {
		return nil
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close recording %s: %w", path, err)
	}
	return nil
}

// Path is the open recording's path, "" when not recording.
func (f *Feed) Path() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recPath
}

// Err is why the last recording stopped by itself, nil if it did not. A
// writer that failed in the background (a flush to a full disk, with no
// event since) is found here too, and the recording is closed.
func (f *Feed) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.rec.(interface{ Err() error }); ok && f.recErr == nil {
		if err := e.Err(); err != nil {
			f.fail(err)
		}
	}
	return f.recErr
}

// fail stops the recording after a write failure; f.mu is held.
func (f *Feed) fail(err error) {
	f.recErr = &stoppedError{path: f.recPath, err: err}
	_ = f.rec.Close()
	f.rec, f.recPath = nil, ""
}

// Recorded is the number of events written to the current (or last)
// recording.
func (f *Feed) Recorded() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recCount
}

// stoppedError says why a recording stopped by itself, short enough for
// the TUI's header: the operating system's reason ("no space left on
// device"), not the chain of paths that led to it. It unwraps to the full
// error.
type stoppedError struct {
	path string
	err  error
}

func (e *stoppedError) Error() string {
	cause := e.err
	var pe *fs.PathError
	if errors.As(e.err, &pe) {
		cause = pe.Err
	}
	return fmt.Sprintf("recording to %s stopped: %v", e.path, cause)
}

func (e *stoppedError) Unwrap() error { return e.err }
