// Package suspect decides when the monitor asks a hook for a census of its
// live tensors (docs/census.md, "When"): when the diagnosis sees memory
// held between steps grow (a leak) or a step come near the device's limit.
// It keeps a store of its own, fed from a Source (a feed of its own that
// the command's feed taps, as the Prometheus exporter's is), diagnoses each
// connected process about twice a second,
// asks once per suspicion, and puts each request it made into the feed as
// a note, so that a recording keeps it beside the census that answers it.
package suspect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Thresholds of a suspicion.
const (
	// Interval is how often the processes are diagnosed.
	Interval = 500 * time.Millisecond
	// NearLimit is the share of the device's memory below which the
	// headroom of the steady peak is a suspicion.
	NearLimit = 0.05
	// Again is how many steps after a census asked on suspicion the same
	// process may be asked again.
	Again = 200
	// QueueLimit is how many events may wait for the asker (its Source's
	// limit), past which the oldest are skipped.
	QueueLimit = 1 << 16
)

// Source is the queue an Asker reads its events from: a feed.Feed.
type Source interface {
	// Next returns every pending event, or ctx's error when none is
	// pending and ctx is done.
	Next(ctx context.Context) ([]session.Event, error)
}

// Asker watches the events of a monitor and asks on suspicion.
type Asker struct {
	src  Source
	now  context.Context // done: a read of src that does not wait
	ask  func(conn uint64, r ipc.Request) error
	note func(session.Event)

	mu     sync.Mutex // guards manual
	store  *session.Store
	asked  map[string]int // process key -> the step it was last asked at
	level  map[string]int // process key -> the level change it was asked about
	nextID int64
	manual []string // process keys a user asked a census of (Ask), under mu
	pids   []int    // pids a user asked a census of (AskPID), under mu
	// CaptureDir is where a CUDA hook asked on suspicion writes its
	// allocator history (the recording's directory); "" asks for none.
	CaptureDir string
}

// New returns an Asker that reads src, asks through ask (ipc.Server.Ask)
// and records each request it made through note (feed.Feed.Put).
func New(src Source, ask func(conn uint64, r ipc.Request) error, note func(session.Event)) *Asker {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	// The diagnosis reads the per-step summaries (kept as in any store);
	// the curves and tables only views show are kept short, as the
	// Prometheus exporter's are.
	store := session.New(session.WithRawWindow(time.Minute), session.WithMaxSpans(256), session.WithMaxSteps(64))
	return &Asker{src: src, now: done, ask: ask, note: note, store: store, asked: map[string]int{}, level: map[string]int{}}
}

// Ask queues a census request for the process with session key process,
// made at the next turn (a user's key; it never blocks).
func (a *Asker) Ask(process string) error {
	a.mu.Lock()
	if len(a.manual) < 64 {
		a.manual = append(a.manual, process)
	}
	a.mu.Unlock()
	return nil
}

// AskPID queues a census request for the connected process whose pid
// (its own, or any in its PID namespaces) is pid, made at the next turn
// (vramscope census; it never blocks).
func (a *Asker) AskPID(pid int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pids) >= 64 {
		return errors.New("too many census requests waiting")
	}
	a.pids = append(a.pids, pid)
	return nil
}

// Run diagnoses the processes every Interval until ctx is done.
func (a *Asker) Run(ctx context.Context) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Turn(time.Now())
		}
	}
}

// Turn applies the queued events and asks each connected process that
// gives cause for a census and has not been asked since Again steps.
func (a *Asker) Turn(now time.Time) {
	a.mu.Lock()
	manual, pids := a.manual, a.pids
	a.manual, a.pids = nil, nil
	a.mu.Unlock()
	if evs, err := a.src.Next(a.now); err == nil {
		a.store.ApplyAll(evs)
	}
	for _, key := range manual {
		for _, p := range a.store.Processes() {
			if p.Key == key && p.Connected && p.Conn != 0 {
				a.request(now, p, ipc.CensusRequest, "asked from the view")
			}
		}
	}
	for _, pid := range pids {
		for _, p := range a.store.Processes() {
			if p.Connected && p.Conn != 0 && hasPID(p, pid) {
				a.request(now, p, ipc.CensusRequest, "asked by vramscope census")
			}
		}
	}
	for _, p := range a.store.Processes() {
		if !p.Connected || p.Conn == 0 {
			continue
		}
		step := p.StepCount()
		if last, ok := a.asked[p.Key]; ok && step < last+Again {
			continue
		}
		d := diagnose.Diagnose(a.store, p)
		why := WhyOf(&d)
		if why == "" {
			// A rise to a new level whose held memory the anatomy does not
			// explain: asked once per level change.
			if n := len(d.Levels); n > 0 && d.Levels[n-1].Unexplained > 0 && d.Levels[n-1].Step > a.level[p.Key] {
				a.level[p.Key] = d.Levels[n-1].Step
				a.request(now, p, ipc.CensusSuspect, fmt.Sprintf("held memory rose to a new level at step %d", d.Levels[n-1].Step))
			}
			continue
		}
		a.asked[p.Key] = step
		a.request(now, p, ipc.CensusSuspect, why)
	}
}

// request asks p for a census and records the request as a note.
func (a *Asker) request(now time.Time, p *session.Process, reason, why string) {
	a.nextID++
	r := ipc.Request{V: ipc.Version, Type: ipc.RequestCensus, ID: a.nextID, Reason: reason}
	if reason == ipc.CensusSuspect {
		r.CaptureDir = a.CaptureDir
	}
	text := "asked for a census (" + why + ")"
	if err := a.ask(p.Conn, r); err != nil {
		text = "could not ask for a census (" + why + "): " + err.Error()
	}
	if line, err := r.Line(); err == nil {
		text += ": " + string(line[:len(line)-1])
	}
	a.note(session.Event{At: now, Conn: p.Conn, Note: &session.Note{Kind: session.NoteRequest, Text: text}})
}

func hasPID(p *session.Process, pid int) bool {
	if p.Hello.PID == pid {
		return true
	}
	for _, n := range p.Hello.NSpid {
		if n == pid {
			return true
		}
	}
	return false
}

// WhyOf is the suspicion a diagnosis gives, "" when none: held memory
// that grows (a leak), or a steady peak within NearLimit of the device's
// memory. (A level change is asked about once per change, in Turn.)
func WhyOf(d *diagnose.Diagnosis) string {
	if d.Pattern == diagnose.PatternGrowth && d.GrowthKind == diagnose.GrowthLeak {
		return "held memory grows"
	}
	n := d.Need
	if n.Headroom.Known() && n.DeviceTotal.Known() && n.DeviceTotal > 0 &&
		float64(n.Headroom) < NearLimit*float64(n.DeviceTotal) {
		return "the peak is near the device's limit"
	}
	return ""
}
