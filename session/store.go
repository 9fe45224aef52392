package session

import (
	"strconv"
	"strings"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
)

// Store holds everything known about a session: one Process per hook
// session and one GPU per NVML device. It is not safe for concurrent use:
// one goroutine (the TUI's Update, or a report) owns it and feeds it.
type Store struct {
	procs  []*Process
	byKey  map[string]*Process
	byConn map[uint64]*Process
	gpus   []*GPU
	limits limits

	start, last time.Time
	// Errors counts bad messages and orphan messages the store skipped.
	Errors int
	// LastError is the newest of those, one line.
	LastError string
	// Notes are the newest connection notes (bounded).
	Notes []TimedNote
	// Forgotten counts processes dropped to bound memory (WithMaxProcesses).
	Forgotten int
	// Refused counts the connections the socket server refused (NoteRefused).
	Refused int
	// Skipped counts the events the monitor's own view skipped because it
	// fell behind (NoteSkip): not lost, a recording has them.
	Skipped uint64
}

// TimedNote is a Note with its time.
type TimedNote struct {
	At time.Time
	Note
}

// GPU is one device as NVML reports it.
type GPU struct {
	UUID  string
	Total Bytes
	// Used is the device's used memory over time.
	Used *Series
	// Last is the newest sample.
	Last probe.Sample
	// Processes is the newest process list read (nil before the first).
	Processes []probe.Process
	// MaxTook is the longest a sampling round of this device took.
	MaxTook time.Duration

	recent []gpuPoint // the newest samples, for processes that say hello late
}

// gpuPoint is a device sample with the process list in effect at it.
type gpuPoint struct {
	smp   probe.Sample
	procs []probe.Process
}

// gpuBacklog is how many samples a device keeps for a process whose hello
// arrives after them (a minute at the default 10 Hz).
const gpuBacklog = 600

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		byKey:  map[string]*Process{},
		byConn: map[uint64]*Process{},
		limits: limits{
			spans: DefaultMaxSpans, steps: 2000, peaks: 10000, marks: 1000, anatomies: 256, procs: DefaultMaxProcesses, goneBytes: DefaultMaxGoneBytes,
			window: 10 * time.Minute, width: time.Second, raw: DefaultMaxRawPoints, levels: wholeLevels,
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Apply feeds one event into the store.
func (s *Store) Apply(ev Event) {
	s.seen(ev.At)
	switch {
	case ev.Msg != nil:
		s.message(ev)
	case ev.GPU != nil:
		s.gpu(ev.GPU)
	case ev.Note != nil:
		s.note(ev)
	}
}

// ApplyAll feeds a batch of events in order.
func (s *Store) ApplyAll(evs []Event) {
	for _, ev := range evs {
		s.Apply(ev)
	}
}

// Processes returns the known processes in the order they first appeared.
func (s *Store) Processes() []*Process { return s.procs }

// Process returns the process with a hook session key, nil if unknown.
func (s *Store) Process(key string) *Process { return s.byKey[key] }

// GPUs returns the NVML devices seen, in the order they first appeared.
func (s *Store) GPUs() []*GPU { return s.gpus }

// GPUFor returns the device a process runs on, matched by CUDA UUID, nil
// when unknown.
func (s *Store) GPUFor(p *Process) *GPU {
	if p.Hello.CUDA == nil {
		return nil
	}
	for _, g := range s.gpus {
		if sameUUID(g.UUID, p.Hello.CUDA.UUID) {
			return g
		}
	}
	return nil
}

// Start is the time of the first event, Last of the newest.
func (s *Store) Start() time.Time { return s.start }

// Last is the time of the newest event.
func (s *Store) Last() time.Time { return s.last }

// Lost is the number of hook messages lost over every process.
func (s *Store) Lost() uint64 {
	var n uint64
	for _, p := range s.procs {
		n += p.Lost
	}
	return n
}

func (s *Store) seen(at time.Time) {
	if at.IsZero() {
		return
	}
	if s.start.IsZero() || at.Before(s.start) {
		s.start = at
	}
	if at.After(s.last) {
		s.last = at
	}
}

func (s *Store) message(ev Event) {
	m := ev.Msg
	if m.Type == ipc.TypeHello {
		s.hello(ev)
		return
	}
	p := s.byConn[ev.Conn]
	if p == nil {
		s.fail("message from connection " + strconv.FormatUint(ev.Conn, 10) + " before its hello")
		return
	}
	if !p.accept(m.Seq) {
		return
	}
	skews := p.ClockSkews
	at := p.when(m.T, ev.At)
	if skews == 0 && p.ClockSkews > 0 {
		s.skewNote(p, ev)
	}
	p.touch(at)
	s.seen(at)
	switch m.Type {
	case ipc.TypePhase:
		p.observe(at, m.Mem)
		unended := p.Unended
		p.phase(at, m)
		if unended == 0 && p.Unended > 0 {
			s.note(Event{At: at, Conn: ev.Conn, Note: &Note{Kind: NoteInfo,
				Text: p.Label() + ": more than 64 phases open at once; the oldest are closed unended (counted), the 8 outermost kept"}})
		}
	case ipc.TypeMark:
		p.observe(at, m.Mem)
		p.mark(at, m)
	case ipc.TypeSample:
		p.observe(at, m.Mem)
	case ipc.TypeAnatomy:
		p.anatomy(at, m)
	case ipc.TypeStats:
		p.Stats = *m.Stats
	case ipc.TypeOOM:
		p.observe(at, m.Mem)
		p.oom(at, m)
	case ipc.TypeCensus:
		p.census(at, m)
	case ipc.TypeGoodbye:
		if m.Stats != nil {
			p.Stats = *m.Stats
		}
		p.Connected = false
		p.finish(at, true, m.Reason)
		s.forgetGone()
	}
}

func (s *Store) hello(ev Event) {
	m := ev.Msg
	p := s.byKey[m.Session]
	if p == nil {
		s.makeRoom()
		s.forgetGone()
		p = newProcess(m.Session, s.limits)
		s.byKey[m.Session] = p
		s.procs = append(s.procs, p)
	}
	p.Hello = *m
	p.Hello.Raw = nil
	p.Hello.Mem = copyMem(m.Mem) // m may be a reused message's (record.Reader.Fold)

	p.clockShift, p.connAt, p.hasT = 0, time.Time{}, false // a new clock pair
	p.Conn, p.Connected = ev.Conn, true
	p.End = nil // a reconnect: the process is still running
	s.byConn[ev.Conn] = p
	skews := p.ClockSkews
	p.touch(p.when(m.T, ev.At))
	if skews == 0 && p.ClockSkews > 0 {
		s.skewNote(p, ev)
	}
	// NVML may have seen this process before its hello got here.
	if g := s.GPUFor(p); g != nil && p.GPU.Len() == 0 {
		for i := range g.recent {
			pt := &g.recent[i]
			s.attribute(p, &pt.smp, pt.procs)
		}
	}
}

func (s *Store) note(ev Event) {
	n := ev.Note
	switch n.Kind {
	case NoteDisconnect:
		if p := s.byConn[ev.Conn]; p != nil && p.Conn == ev.Conn {
			p.Connected = false
			p.finish(p.Last, false, "")
		}
		delete(s.byConn, ev.Conn)
		s.forgetGone()
	case NoteError:
		s.fail(n.Text)
	case NoteResume:
		if p := s.byConn[ev.Conn]; p != nil && p.lastSeq < n.Seq {
			p.lastSeq = n.Seq
		}
	case NoteRefused:
		s.Refused++
	case NoteSkip:
		if p := s.byConn[ev.Conn]; p != nil && p.lastSeq < n.Seq {
			p.Skipped += n.Seq - p.lastSeq
			p.lastSeq = n.Seq
		}
		s.Skipped += n.Count
		return // not a note worth keeping: the count says it
	}
	if len(s.Notes) >= 200 {
		s.Notes = append(s.Notes[:0], s.Notes[1:]...)
	}
	s.Notes = append(s.Notes, TimedNote{ev.At, *n})
}

func (s *Store) fail(text string) {
	s.Errors++
	s.LastError = text
}

// gpu records an NVML sample on its device and on every process that runs
// on that device.
func (s *Store) gpu(smp *probe.Sample) {
	g := s.device(smp)
	g.Last = *smp
	g.Last.Processes = nil
	g.MaxTook = max(g.MaxTook, smp.Took)
	if smp.Processes != nil {
		g.Processes = append([]probe.Process(nil), smp.Processes...)
	}
	if len(g.recent) >= gpuBacklog {
		g.recent = append(g.recent[:0], g.recent[len(g.recent)/2:]...)
	}
	kept := gpuPoint{g.Last, g.Processes}
	if smp.Processes != nil {
		kept.smp.Processes = g.Processes // marks the sample as carrying a list
	}
	g.recent = append(g.recent, kept)
	if smp.Total > 0 {
		g.Total = Bytes(smp.Total)
	}
	if smp.Used >= 0 {
		g.Used.Push(smp.At, smp.Used)
	}
	for _, p := range s.procs {
		if !p.Connected || p.Hello.CUDA == nil || !sameUUID(g.UUID, p.Hello.CUDA.UUID) {
			continue
		}
		s.attribute(p, smp, g.Processes)
	}
}

// attribute gives a process its share of a device sample: its own entry in
// the process list when the sample carries a fresh list (1 Hz), or the whole
// device, at every sample (10 Hz), when no process is visible at all. The
// device's change between two lists is not split among processes: it may
// belong to any of them, so a process's figure only moves when the driver
// says so.
func (s *Store) attribute(p *Process, smp *probe.Sample, procs []probe.Process) {
	used, ok := probe.ProcessUsed(probe.Sample{Processes: procs}, p.Hello.PID, p.Hello.NSpid)
	switch {
	case ok && smp.Processes != nil:
		p.observeGPU(smp.At, used, "process")
		if smp.Used >= 0 {
			p.Others.Push(smp.At, max(smp.Used-used, 0))
		}
	case ok:
		// Between list reads the last listed value stands.
	case len(procs) == 0 && smp.Used >= 0:
		// No process is visible (a container without the host's PID
		// namespace, MIG): the device is the best figure there is.
		p.observeGPU(smp.At, smp.Used, "device")
	default:
		// Others are listed but not this process: it holds nothing on the
		// device yet (it has not touched CUDA, or the list predates it).
	}
}

func (s *Store) device(smp *probe.Sample) *GPU {
	for _, g := range s.gpus {
		if g.UUID == smp.Device {
			return g
		}
	}
	g := &GPU{UUID: smp.Device, Total: Unknown, Used: s.limits.newSeries()}
	s.gpus = append(s.gpus, g)
	return g
}

// sameUUID compares device UUIDs the way CUDA and NVML spell them: with or
// without the "GPU-" prefix, in any case.
func sameUUID(a, b string) bool {
	trim := func(u string) string {
		u = strings.ToLower(strings.TrimSpace(u))
		return strings.TrimPrefix(u, "gpu-")
	}
	return a != "" && b != "" && trim(a) == trim(b)
}

func itoa(v int) string { return strconv.Itoa(v) }

// skewNote says, once per process, that its clock was re-anchored.
func (s *Store) skewNote(p *Process, ev Event) {
	s.note(Event{At: ev.At, Conn: ev.Conn, Note: &Note{Kind: NoteInfo,
		Text: p.Label() + ": the hook's clock is off by " + p.MaxClockSkew.Round(time.Millisecond).String() +
			" from the monitor's; its times are re-anchored to when its messages arrived"}})
}
