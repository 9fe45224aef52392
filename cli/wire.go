package cli

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/probe/nvmlprobe"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
	"github.com/vramscope/vramscope/tui"
)

// openNVML opens the real NVML sampler, or a null one that says why not.
func openNVML() probe.Sampler {
	return probe.Open(func() (probe.Sampler, error) { return nvmlprobe.New() })
}

// poll samples NVML into the feed until ctx is done, and returns a channel
// closed when it has stopped. A null sampler (no NVML) is not polled at all.
func poll(ctx context.Context, s probe.Sampler, f *feed.Feed, logf func(string, ...any), dev, proc time.Duration) <-chan struct{} {
	if _, null := probe.IsNull(s); null {
		done := make(chan struct{})
		close(done)
		return done
	}
	p := probe.NewPoller(s, probe.WithDeviceInterval(dev), probe.WithProcessInterval(proc))
	for _, n := range p.Notes() {
		logf("%s", n)
	}
	return p.Start(ctx, f.Samples)
}

// recorder returns the feed's way of opening a recording with a header
// that says where the session came from.
func recorder(source string) feed.Opener {
	return func(path string) (feed.Writer, error) {
		host, _ := os.Hostname()
		return record.Create(path, record.Header{
			Tool:   "vramscope " + buildVersion(),
			Host:   host,
			Argv:   os.Args,
			Source: source,
		})
	}
}

// debugLog returns where the program logs: a file behind --debug, else
// nowhere (the TUI owns the terminal).
func debugLog(path string) (logf func(string, ...any), closer func(), err error) {
	if path == "" {
		return func(string, ...any) {}, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open debug log: %w", err)
	}
	l := log.New(f, "", log.LstdFlags|log.Lmicroseconds)
	return l.Printf, func() { f.Close() }, nil
}

// stderrLog logs one line per problem to w, for headless commands.
func stderrLog(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "vramscope: "+format+"\n", args...)
	}
}

// readRecording streams a recording's events to each, in order, and
// returns the header and the reader's warnings (torn or bad lines skipped).
func readRecording(path string, each func(session.Event)) (record.Header, []string, error) {
	r, err := record.Open(path)
	if err != nil {
		return record.Header{}, nil, err
	}
	defer r.Close()
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return r.Header(), r.Warnings(), nil
		}
		if err != nil {
			return r.Header(), r.Warnings(), fmt.Errorf("read %s: %w", path, err)
		}
		if ev.Msg != nil {
			ev.Msg.Raw = nil // only a recorder needs the raw line
		}
		each(ev)
	}
}

// openReplay opens a recording for a streamed replay: it checks the header
// now, and returns a function that reads the events from the first one,
// paced by the timeline, each time the replay asks (to play, to find the
// end, to seek back). Nothing is held beyond what the replay keeps. The
// reader's warnings (skipped or torn lines) are collected once, by the
// first read that reaches the end.
func openReplay(path string) (record.Header, func() (tui.ReplayStream, error), *replayWarnings, error) {
	r, err := record.Open(path)
	if err != nil {
		return record.Header{}, nil, nil, err
	}
	hdr := r.Header()
	r.Close()
	warned := &replayWarnings{}
	open := func() (tui.ReplayStream, error) {
		r, err := record.Open(path)
		if err != nil {
			return nil, err
		}
		return &pacedReader{r: r, path: path, warned: warned}, nil
	}
	return hdr, open, warned, nil
}

// pacedReader is a record.Reader whose events are paced for replay.
type pacedReader struct {
	r      *record.Reader
	pacer  session.Pacer
	path   string
	warned *replayWarnings
}

func (p *pacedReader) Next() (session.Event, error) {
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

func (p *pacedReader) Close() error { return p.r.Close() }

// ReplayEnd finds the recording's paced end with record.PacedEnd, which
// reads only the times pacing needs: the replay's pass for its length no
// longer decodes every event.
func (p *pacedReader) ReplayEnd(ctx context.Context) (time.Time, error) {
	return record.PacedEnd(ctx, p.path)
}

var _ tui.ReplayEnder = (*pacedReader)(nil)

// replayWarnings are the reader's warnings of a whole pass over a
// recording, shown once the TUI has given the terminal back.
type replayWarnings struct {
	mu   sync.Mutex
	done bool
	list []string
}

func (w *replayWarnings) set(list []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.done, w.list = true, list
	}
}

// Lines returns the warnings, nil before a read has reached the end.
func (w *replayWarnings) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.list
}

// privateSocket makes a socket path in a new 0700 directory, for the demo,
// so it never collides with a monitor listening on the default socket.
func privateSocket() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "vramscope-demo-")
	if err != nil {
		return "", nil, fmt.Errorf("make demo socket directory: %w", err)
	}
	return filepath.Join(dir, "demo.sock"), func() { os.RemoveAll(dir) }, nil
}

// serve runs the socket server until ctx is done and returns a channel
// closed when it has stopped.
func serve(ctx context.Context, srv *ipc.Server, f *feed.Feed, logf func(string, ...any)) <-chan struct{} {
	return serveTo(ctx, srv, f.Deliver, logf)
}

// serveTo is serve with its own delivery callback.
func serveTo(ctx context.Context, srv *ipc.Server, deliver func(ipc.Delivery), logf func(string, ...any)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, deliver); err != nil && ctx.Err() == nil {
			logf("socket server stopped: %v", err)
		}
	}()
	return done
}

// drain applies what is still pending in the feed, waiting at most d for
// more to arrive.
func drain(f *feed.Feed, s *session.Store, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		evs, err := f.Next(ctx)
		if err != nil {
			return
		}
		s.ApplyAll(evs)
	}
}

// simNVML drives the simulated sampler from the demo's own (virtual) clock:
// a device reading every 100 ms of demo time, the process list every second,
// as the real poller does in real time. Runs at any demo speed stay
// deterministic.
type simNVML struct {
	mu            sync.Mutex
	sim           *probe.Simulated
	now           time.Time
	next, nextPro time.Time
	buf           []probe.Sample
	emit          func([]probe.Sample)
}

func newSimNVML(emit func([]probe.Sample)) *simNVML {
	d := &simNVML{emit: emit}
	d.sim = probe.NewSimulated(probe.WithSimClock(func() time.Time { return d.now }))
	return d
}

func (d *simNVML) onMem(rank int, at time.Time, m ipc.Mem) {
	d.sim.OnMem(rank, at, m.Reserved)
	d.mu.Lock()
	defer d.mu.Unlock()
	if at.Before(d.next) {
		return
	}
	d.now = at
	withProc := !at.Before(d.nextPro)
	var err error
	if d.buf, err = d.sim.Sample(d.buf, withProc); err != nil {
		return
	}
	d.next = at.Add(probe.DefaultDeviceInterval)
	if withProc {
		d.nextPro = at.Add(probe.DefaultProcessInterval)
	}
	d.emit(d.buf)
}

func (d *simNVML) onExit(rank int) { d.sim.OnExit(rank) }

// nvmlTap drives the demo's simulated NVML from the hook messages as the
// monitor receives them, so each sample is put in the feed (and the
// recording) right after the hook line it reflects. Driven from the
// demo's sender, it ran up to 11 s ahead of the lines still in the socket
// at full speed, and a replay then held the process back (issue 11).
type nvmlTap struct {
	nv    *simNVML
	mu    sync.Mutex
	conns map[uint64]tapConn
}

// tapConn is what the tap needs of a connection's hello.
type tapConn struct {
	rank int
	mono float64
	wall float64
}

func newNVMLTap(nv *simNVML) *nvmlTap { return &nvmlTap{nv: nv, conns: map[uint64]tapConn{}} }

// deliver hands d on to next, then to the simulated device.
func (t *nvmlTap) deliver(next func(ipc.Delivery)) func(ipc.Delivery) {
	return func(d ipc.Delivery) {
		next(d)
		t.observe(d)
	}
}

func (t *nvmlTap) observe(d ipc.Delivery) {
	if d.Kind == ipc.Disconnected {
		t.mu.Lock()
		c, ok := t.conns[d.Conn]
		delete(t.conns, d.Conn)
		t.mu.Unlock()
		if ok {
			t.nv.onExit(c.rank)
		}
		return
	}
	if d.Kind != ipc.Received {
		return
	}
	m := d.Msg
	if m.Type == ipc.TypeHello && m.Clock != nil {
		c := tapConn{mono: m.Clock.Mono, wall: m.Clock.Wall}
		if m.Rank != nil {
			c.rank = *m.Rank
		}
		t.mu.Lock()
		t.conns[d.Conn] = c
		t.mu.Unlock()
		return
	}
	if m.Mem == nil {
		return
	}
	t.mu.Lock()
	c, ok := t.conns[d.Conn]
	t.mu.Unlock()
	if !ok {
		return
	}
	// The hello's clock pair maps the hook's time to wall time, to the
	// microsecond, as the store does.
	at := time.Unix(0, 0).Add(time.Duration(math.Round((c.wall+m.T-c.mono)*1e6)) * time.Microsecond)
	t.nv.onMem(c.rank, at, *m.Mem)
}
