package session

import (
	"cmp"
	"math"
	"strings"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// Process is one training process (one hook session) as the store knows it.
type Process struct {
	// Key is the hook's session id.
	Key string
	// Hello is the latest hello of this session.
	Hello ipc.Message
	// Connected is false once the hook said goodbye or its connection ended.
	Connected bool
	// Conn is the connection the process speaks on now.
	Conn uint64

	// Lost counts messages that never arrived (gaps in seq); Duplicates
	// counts replayed messages that were already known.
	Lost, Duplicates uint64
	// ClockSkews counts the messages whose hook time was re-anchored or
	// raised because it could not be true (see when); MaxClockSkew is the
	// largest such offset.
	ClockSkews   int
	MaxClockSkew time.Duration
	// Unended counts phases closed by the monitor because more than 64
	// were open at once (their end edge never came): the oldest goes, but
	// never one of the 8 outermost.
	Unended int
	// Skipped counts this process's messages the monitor's own view skipped
	// when it fell behind (a NoteSkip): they reached the monitor, and a
	// recording, but not this store. They are not in Lost.
	Skipped uint64
	// Stats are the hook's own counters as it last reported them.
	Stats ipc.Stats

	// Allocated, MaxAllocated and Reserved are the allocator's curves.
	Allocated, MaxAllocated, Reserved *Series
	// GPU is the driver's figure for this process (NVML process used, or
	// device used when per-process memory is not visible).
	GPU *Series
	// GPUSource says what GPU holds: "process", "device" or "" (none).
	GPUSource string
	// NonPyTorch is what the driver charges the process beyond PyTorch's
	// reservation (CUDA context, cuBLAS/NCCL workspaces, other allocators):
	// each process-list reading minus the hook's reserved at that moment.
	NonPyTorch *Series
	// Others is what other processes held on the device at each process-list
	// reading: device used minus this process, from the same reading.
	Others *Series

	// Mem is the newest allocator snapshot, nil on CPU runs. It is the
	// process's own, overwritten by each snapshot.
	Mem *ipc.Mem
	// Anatomy is the newest tensor accounting, nil before the first.
	Anatomy *Anatomy
	// Anatomies are the accountings of the measured steps (bounded).
	Anatomies []Anatomy
	// Marks are the user's point events (bounded).
	Marks []Mark
	// End is how the process ended, nil while it runs.
	End *End
	// OOM is the hook's out-of-memory report, nil when none came.
	OOM *OOM
	// Censuses are the hook's censuses of the live tensors, oldest first
	// (bounded: MaxCensuses).
	Censuses []Census
	// Inputs is true once a forward reported its input size.
	Inputs bool

	First, Last time.Time

	pendingGap []point // process readings waiting for the hook's reserved at their time
	spans      []Span  // recent spans, oldest first (bounded)
	open       []int   // indices into spans of open phases
	pendingFwd int     // index into spans of an ended forward not yet in its step, -1
	steps      []*Step
	spare      []*Step // rows dropped from steps, for newRow to reuse
	// models counts the steps of each watch name, modelOrder in the order
	// the names came (countModel); sawStep: a step phase was seen.
	models     map[string]int
	modelOrder []string
	modelsCut  bool
	sawStep    bool
	peaks      []StepPeak // one per step, whole session
	lastSeq    uint64
	clockShift time.Duration // re-anchoring of the hello's clock (when)
	connAt     time.Time     // when the hello of this clock pair arrived
	lastT      float64       // the newest message's t, and its time
	lastAt     time.Time
	hasT       bool
	maxStep    int // the highest step index seen: a higher one is new
	// gapSinceRead: messages were lost since the last phase or mark read
	// (with an exact-peaks hook, the counters were reset unseen).
	gapSinceRead bool
	// autoBegins counts the automatic phases begun, lastAuto the step of
	// the newest (Span.autoAt).
	autoBegins uint64
	lastAuto   int
	limits     limits
	totals     sessionTotals
}

// Anatomy is one tensor accounting made by the hook.
type Anatomy struct {
	At                            time.Time
	Step                          int
	Weights, Gradients, Optimizer Bytes
	Activations, BatchSize        Bytes // Unknown when not measured
	Params                        int64
	Device                        string
	// Tokens is the step's input tokens, -1 when unknown.
	Tokens int64
	// ActivationsStep is the step Activations was measured at and
	// ActivationsBatch, ActivationsTokens the input size then (-1 when the
	// hook did not say: an older hook measures at Step, batch BatchSize).
	// ActivationsSource is "measured", "scaled" (the hook scaled its last
	// measurement by the input-size ratio) or "" (not said).
	ActivationsStep                     int
	ActivationsBatch, ActivationsTokens int64
	ActivationsSource                   string
	// Saved is the hook's by-module split of the activations measured at
	// SavedStep (SavedActivations in all); a scaled anatomy, and a
	// measured one sent without a split, keep the last one. Nil from
	// hooks that send none.
	Saved            *ipc.Saved
	SavedStep        int
	SavedActivations Bytes
}

// Mark is a named point event.
type Mark struct {
	At   time.Time
	Name string
	Step int
	Mem  *ipc.Mem
}

type limits struct {
	spans, steps, peaks, marks, anatomies int
	window, width                         time.Duration
	raw                                   int // raw points per series
	peakRaw                               int // raw points of MaxAllocated; 0: raw
	levels                                []levelSpec
	procs                                 int // processes a Store keeps
	goneBytes                             int // bytes a Store keeps of gone ones
}

// newSeries returns a series bounded as the store's limits say.
func (l limits) newSeries() *Series { return newSeriesOf(l.window, l.width, l.raw, l.levels) }

func newProcess(key string, l limits) *Process {
	return &Process{
		Key:          key,
		Allocated:    l.newSeries(),
		MaxAllocated: newSeriesOf(l.window, l.width, cmp.Or(l.peakRaw, l.raw), l.levels),
		Reserved:     l.newSeries(),
		GPU:          l.newSeries(),
		NonPyTorch:   l.newSeries(),
		Others:       l.newSeries(),
		pendingFwd:   -1,
		limits:       l,
	}
}

// when maps a hook timestamp to wall time through the hello's clock pair,
// to the microsecond: a float64 of Unix seconds carries no more, and
// rounding (not truncating) maps the same instant to the same time however
// it was computed.
//
// The mapped time is kept true against recv, when the monitor received
// the message: one hook whose hello said +1 h, or
// whose t jumped back 500 s, stretched a 3-second recording into a
// 4,101-second session that began 8 minutes before the recording. Hook and
// monitor share the host's clock, and t is a monotonic clock, so:
//   - a hello mapped more than skewSlack after it was received lies: the
//     clock is re-anchored so that the hello lands at recv;
//   - a t more than skewSlack below the previous one went back: the clock
//     is re-anchored so that it lands at the previous message's time;
//   - nothing the hook sent happened more than lateHello before its
//     connection's hello arrived: earlier times are raised to that.
//
// Each counts in ClockSkews (the largest offset in MaxClockSkew). A hook
// clock that runs faster than the monitor's (the demo's virtual clock at
// full speed) is kept as it is.
func (p *Process) when(t float64, recv time.Time) time.Time {
	c := p.Hello.Clock
	if c == nil {
		return recv
	}
	s := c.Wall + (t - c.Mono)
	sec, frac := math.Modf(s)
	at := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).Add(p.clockShift)
	if recv.IsZero() {
		return at
	}
	if p.connAt.IsZero() { // the hello
		p.connAt = recv
		if off := at.Sub(recv); off > skewSlack {
			at = p.skew(at, recv)
		}
	} else if p.hasT && t < p.lastT-skewSlack.Seconds() {
		at = p.skew(at, p.lastAt)
	}
	if floor := p.connAt.Add(-lateHello); at.Before(floor) {
		at = p.skew(at, floor)
	}
	p.lastT, p.lastAt, p.hasT = t, at, true
	return at
}

// skew re-anchors the process's clock so that at becomes to.
func (p *Process) skew(at, to time.Time) time.Time {
	p.clockShift += to.Sub(at)
	p.noteSkew(to.Sub(at))
	return to
}

func (p *Process) noteSkew(off time.Duration) {
	p.ClockSkews++
	p.MaxClockSkew = max(p.MaxClockSkew, off, -off)
}

// skewSlack is how far a hook time may stray (Process.when): the hello's
// clock pair is read in two calls, and a message waits a little in queues.
const skewSlack = time.Second

// lateHello bounds how long before its arrival a hello may have been sent
// (a monitor that was stopped receives its backlog late).
const lateHello = 2 * time.Minute

// accept applies the seq rules of docs/protocol.md: false for a duplicate.
func (p *Process) accept(seq uint64) bool {
	if seq <= p.lastSeq {
		p.Duplicates++
		return false
	}
	if seq > p.lastSeq+1 {
		p.Lost += seq - p.lastSeq - 1
		p.gapSinceRead = true
	}
	p.lastSeq = seq
	return true
}

func (p *Process) touch(at time.Time) {
	if p.First.IsZero() || at.Before(p.First) {
		p.First = at
	}
	if at.After(p.Last) {
		p.Last = at
	}
}

// observe records an allocator snapshot on the curves and in open spans.
func (p *Process) observe(at time.Time, m *ipc.Mem) {
	if m == nil {
		return
	}
	if p.Mem == nil {
		p.Mem = new(ipc.Mem)
	}
	*p.Mem = *m // a copy: m may be a reused message's (record.Reader.Fold)
	p.Allocated.Push(at, m.Allocated)
	p.MaxAllocated.Push(at, m.MaxAllocated)
	p.Reserved.Push(at, m.Reserved)
	for _, i := range p.open {
		p.spans[i].observe(m)
	}
	p.resolveGaps()
}

// observeGPU records the driver's figure for this process. NVML samples and
// hook messages travel different paths, so a sample may arrive after the
// phases it falls into have ended: it is attributed by its time, to every
// recent span that covers it, and to their step cells.
func (p *Process) observeGPU(at time.Time, used int64, source string) {
	p.GPU.Push(at, used)
	p.GPUSource = source
	p.markGPUDuring(at)
	p.attributeAt(at, Bytes(used), func(sp *Span) *Bytes { return &sp.PeakGPU },
		func(c *Cell) *Bytes { return &c.PeakGPU }, func(st *Step) *Bytes { return &st.PeakGPU })
	if source == "process" {
		if len(p.pendingGap) >= gpuLookback {
			p.pendingGap = append(p.pendingGap[:0], p.pendingGap[1:]...)
		}
		p.pendingGap = append(p.pendingGap, point{at.UnixNano(), used})
		p.resolveGaps()
	}
}

// resolveGaps turns process readings into non-PyTorch figures once the
// hook's reserved is known at their time.
func (p *Process) resolveGaps() {
	hookAt, _, ok := p.Reserved.Last()
	if !ok || len(p.pendingGap) == 0 {
		return
	}
	done := 0
	for _, pt := range p.pendingGap {
		at := time.Unix(0, pt.t)
		if at.After(hookAt) {
			break
		}
		done++
		r, ok := p.Reserved.At(at)
		if !ok {
			// A reading just before the hook's first point: the two clocks
			// (the hook's, mapped through its hello, and the monitor's)
			// agree only to within a little.
			first, v, known := p.Reserved.First()
			if !known || first.Sub(at) > clockSlack {
				continue
			}
			r = v
		}
		gap := max(pt.v-r, 0)
		p.NonPyTorch.Push(at, gap)
		p.attributeAt(at, Bytes(gap), func(sp *Span) *Bytes { return &sp.PeakNonPyTorch },
			func(c *Cell) *Bytes { return &c.PeakNonPyTorch }, nil)
	}
	p.pendingGap = append(p.pendingGap[:0], p.pendingGap[done:]...)
}

// attributeAt raises a peak field of every recent span that covers at, and
// of its step cell and step once the span has ended.
func (p *Process) attributeAt(at time.Time, v Bytes, span func(*Span) *Bytes, cell func(*Cell) *Bytes, step func(*Step) *Bytes) {
	for k := len(p.spans) - 1; k >= 0 && k >= len(p.spans)-gpuLookback; k-- {
		sp := &p.spans[k]
		f := span(sp)
		if sp.Start.After(at) || !sp.Open() && sp.End.Before(at) || *f >= v {
			continue
		}
		*f = v
		if sp.Open() || sp.Unended {
			continue // an unended phase has no row
		}
		st := p.step(sp.Step)
		if c := st.Cell(sp.Name); c != nil {
			*cell(c) = cell(c).Max(v)
		}
		if step != nil && !sp.User {
			*step(st) = step(st).Max(v)
			p.updatePeak(sp.Step)
		}
	}
}

// markGPUDuring notes, on every recent span that covers at (and on its
// step cell once it has ended), that an NVML reading was taken during it.
func (p *Process) markGPUDuring(at time.Time) {
	for k := len(p.spans) - 1; k >= 0 && k >= len(p.spans)-gpuLookback; k-- {
		sp := &p.spans[k]
		if sp.Start.After(at) || !sp.Open() && sp.End.Before(at) || sp.GPUDuring {
			continue
		}
		sp.GPUDuring = true
		if !sp.Open() && !sp.Unended {
			if c := p.step(sp.Step).Cell(sp.Name); c != nil {
				c.GPUDuring = true
			}
		}
	}
}

// clockSlack is how far apart the hook's clock and the monitor's may be
// taken to show the same moment.
const clockSlack = 10 * time.Millisecond

// gpuLookback is how many recent spans a late NVML sample is matched
// against: NVML lags the hook by at most a few hundred milliseconds.
const gpuLookback = 64

// InEffect is a series' value at a time, Unknown before its first point.
func InEffect(s *Series, at time.Time) Bytes {
	if v, ok := s.At(at); ok {
		return Bytes(v)
	}
	return Unknown
}

func (p *Process) phase(at time.Time, m *ipc.Message) {
	if m.Edge == ipc.EdgeBegin {
		p.begin(at, m)
		return
	}
	for k := len(p.open) - 1; k >= 0; k-- {
		if sp := &p.spans[p.open[k]]; sp.Name == m.Name && sp.User == m.User {
			sp.Grad, sp.Failed = m.Grad, m.Failed
			if m.Span == ipc.SpanStep && m.Mem != nil {
				sp.StepRead, sp.SameAs = plainOf(m.Mem), -1
				if m.SameAs != nil {
					sp.SameAs = *m.SameAs
				}
			}
			p.end(k, at, m.Mem)
			return
		}
	}
	// An end without its begin (the begin was lost): nothing to close.
}

func (p *Process) begin(at time.Time, m *ipc.Message) {
	if !m.User {
		p.settleForward(m.Name == "loss" || m.Name == "backward")
	}
	if !m.User {
		// Automatic phases follow one another: a new one closes the last.
		for k := len(p.open) - 1; k >= 0; k-- {
			if !p.spans[p.open[k]].User {
				p.end(k, at, m.Mem)
			}
		}
	}
	if c := m.Closes; c != nil && m.Mem != nil && !m.User {
		p.closeSkipped(at, c, m.Mem)
	}
	if m.User && m.Mem != nil {
		p.readBetween(m.Step, m.Mem, true)
	}
	if !m.User {
		p.autoBegins, p.lastAuto = p.autoBegins+1, m.Step
	}
	p.compactSpans()
	// A begin edge without a read of its own (the hook reads end edges
	// only, docs/hook.md "Cost") starts from the newest snapshot before it:
	// the previous phase's end, or a sample taken since.
	base := m.Mem
	if base == nil {
		base = p.Mem
	}
	sp := Span{
		Name: m.Name, Step: m.Step, Micro: m.Micro, User: m.User, Start: at, Begin: readOf(base),
		PeakAllocated: Unknown, PeakReserved: Unknown,
		PeakGPU: InEffect(p.GPU, at), PeakNonPyTorch: InEffect(p.NonPyTorch, at),
		Batch: -1, Tokens: -1, SameAs: -1, autoAt: p.autoBegins,
	}
	if !m.User {
		sp.Model = printable(m.Model)
	}
	if in := m.Input; in != nil && !m.User {
		p.Inputs = true
		if in.Batch != nil {
			sp.Batch = *in.Batch
		}
		if in.Tokens != nil {
			sp.Tokens = *in.Tokens
		}
	}
	if len(p.open) >= maxOpen {
		p.forgetOldestOpen(at)
	}
	p.spans = append(roomFor(p.spans, p.limits.spans), sp)
	p.open = append(p.open, len(p.spans)-1)
	p.spans[len(p.spans)-1].observe(m.Mem)
}

// readBetween folds a read that is no automatic phase's end (a mark, a
// user phase's edge) into what its peak covers. The hook reset the
// counters at the read before, so with exact peaks the open phases' peaks
// so far are in it; and where no automatic phase is open inside step
// step, not yet closed (a plain step's read still to come), the step's
// phases since that read are: inside says the read's interval is the
// step's (a mark, a user phase's begin), not a user phase's own (its end).
func (p *Process) readBetween(step int, m *ipc.Mem, inside bool) {
	gap := p.gapSinceRead // a loss before this read is inside what it covers
	p.gapSinceRead = false
	exact, auto := p.exactPeaks(), false
	for _, i := range p.open {
		sp := &p.spans[i]
		sp.gap = sp.gap || gap
		auto = auto || !sp.User
		if exact {
			sp.PeakAllocated = sp.PeakAllocated.Max(Bytes(m.MaxAllocated))
			sp.PeakReserved = sp.PeakReserved.Max(Bytes(m.MaxReserved))
		}
	}
	if !exact || auto || !inside {
		return
	}
	if st := p.StepRow(step); st != nil && !st.plain.Known() {
		st.inner = st.inner.Max(Bytes(m.MaxAllocated))
		st.gap = st.gap || gap
	}
}

// closeSkipped takes a begin edge's read as the closing read of step
// c.Step (ipc.Closes): a plain step that skipped its update, whose phases'
// ends carried no read. It is that step's one read, as a span "step"
// read at its step phase's end would have been: its peak since the read
// before it, and the memory the step held. The hook reset the counters
// there, so messages lost before it touch that step only.
func (p *Process) closeSkipped(at time.Time, c *ipc.Closes, m *ipc.Mem) {
	gap := p.gapSinceRead
	p.gapSinceRead = false
	st := p.StepRow(c.Step)
	if st == nil {
		return // left the table
	}
	st.plain = Bytes(m.MaxAllocated)
	st.PeakReserved = st.PeakReserved.Max(Bytes(m.MaxReserved))
	st.hookSame = -1
	if c.SameAs != nil {
		st.hookSame = *c.SameAs
	}
	st.gap = st.gap || gap
	if (c.Held == nil || *c.Held) && !at.Before(st.heldAt) {
		st.Held, st.heldAt = Bytes(m.Allocated), at
	}
	p.updatePeak(c.Step)
}

// maxOpen bounds the phases open at once in one process. Phases nest a
// few deep; a hook that begins user phases and never ends them made every
// snapshot visit each open one and blocked the compaction of spans: 100k
// open phases took 5.3 s, 200k held 243 MB.
const maxOpen = 64

// keepOuter is how many of the outermost open phases are never forgotten:
// a phase around the whole loop is the oldest open one, and real.
const keepOuter = 8

// forgetOldestOpen ends the oldest open phase but the keepOuter outermost
// without its end edge: it stays on the timeline up to at, marked
// Unended, and goes in no step's row. The process counts it in Unended.
func (p *Process) forgetOldestOpen(at time.Time) {
	sp := &p.spans[p.open[keepOuter]]
	sp.End, sp.Unended = at, true
	p.open = append(p.open[:keepOuter], p.open[keepOuter+1:]...)
	p.Unended++
}

func (p *Process) end(k int, at time.Time, m *ipc.Mem) {
	sp := &p.spans[p.open[k]]
	gap := p.gapSinceRead
	if m != nil {
		sp.gap, p.gapSinceRead = sp.gap || p.gapSinceRead, false
	}
	sp.close(at, m, p.exactPeaks())
	if v, ok := p.GPU.MaxBetween(sp.Start, at); ok {
		sp.PeakGPU = sp.PeakGPU.Max(Bytes(v))
		sp.GPUDuring = true
	}
	if v, ok := p.NonPyTorch.MaxBetween(sp.Start, at); ok {
		sp.PeakNonPyTorch = sp.PeakNonPyTorch.Max(Bytes(v))
	}
	p.open = append(p.open[:k], p.open[k+1:]...)
	if sp.User && m != nil {
		// The phases open around a user phase held what it did; and where
		// automatic phases ran inside it (a phase around forward and
		// backward), its interval is also their step's.
		p.gapSinceRead = gap
		if p.autoBegins != sp.autoAt {
			p.readBetween(p.lastAuto, m, true)
		} else {
			p.readBetween(sp.Step, m, false)
		}
	}
	if sp.Name == "forward" && !sp.User && sp.Failed == "" {
		// A training forward is followed by loss (the hook begins it when
		// the output needs a gradient); a forward under no_grad is not.
		// Which one this was is known at the next automatic phase. (One
		// that raised was training: its step failed.)
		p.settleForward(false)
		p.pendingFwd = p.open0(sp)
		return
	}
	st := p.step(sp.Step)
	st.add(sp)
	p.countModel(st)
	p.updatePeak(sp.Step)
}

// maxModels bounds the watch names counted per process (a hook names one
// per watch(); more than this are not counted, and ModelSteps says so).
const maxModels = 32

// countModel counts st under its model name, moving it when the name changed
// (a step named by its first phase until its step phase names it). A step
// that failed is no step its model ran: it leaves its count, as it is left
// out of the totals.
func (p *Process) countModel(st *Step) {
	if st.Stepped {
		p.sawStep = true
	}
	name := st.Model
	if st.Failed != "" {
		name = ""
	}
	if name == st.counted {
		return
	}
	if p.models == nil {
		p.models = map[string]int{}
	}
	if st.counted != "" {
		p.models[st.counted]--
		st.counted = ""
	}
	if name == "" {
		return
	}
	if _, ok := p.models[name]; !ok {
		if len(p.modelOrder) >= maxModels {
			p.modelsCut = true
			return
		}
		p.modelOrder = append(p.modelOrder, name)
	}
	p.models[name]++
	st.counted = name
}

// ModelSteps is how many steps one watch's name was given.
type ModelSteps struct {
	Model string `json:"model"`
	Steps int    `json:"steps"`
}

// ModelSteps returns the steps of each watch name, in the order the names
// first came (empty when the hook sent none: one unnamed model). cut is
// true when more names came than are counted.
func (p *Process) ModelSteps() (out []ModelSteps, cut bool) {
	for _, name := range p.modelOrder {
		out = append(out, ModelSteps{name, p.models[name]})
	}
	return out, p.modelsCut
}

// NoOptimizer reports whether the process has steps but no step phase was
// ever seen: its watch has no optimizer, and its steps end at the model's
// next training forward after a backward (docs/hook.md, "Loop shapes").
func (p *Process) NoOptimizer() bool { return p.StepCount() > 0 && !p.sawStep }

// step finds or makes the table row of a step.
func (p *Process) step(index int) *Step {
	for k := len(p.steps) - 1; k >= 0 && k >= len(p.steps)-4; k-- {
		if p.steps[k].Index == index {
			return p.steps[k]
		}
	}
	if len(p.steps) == 0 || index <= p.maxStep {
		for _, st := range p.steps {
			if st.Index == index {
				return st
			}
		}
	}
	p.maxStep = max(p.maxStep, index)
	st := p.newRow(index)
	p.steps = append(p.steps, st)
	// Keep the first steps (warmup lives there) and the most recent ones,
	// dropping a block from the middle at a time: one step at a time moved
	// 1,800 pointers a step, a fifth of a fast session's report time.
	if keep := p.limits.steps; len(p.steps) > keep+keep/10 {
		head := keep / 10
		drop := len(p.steps) - keep
		p.spare = append(p.spare, p.steps[head:head+drop]...)
		p.steps = append(p.steps[:head], p.steps[head+drop:]...)
		clear(p.steps[len(p.steps) : len(p.steps)+drop]) // the moved-out pointers
	}
	return st
}

// newRow is an empty table row for step index. It is a row the table
// dropped, when there is one: a session past the table's bound drops as
// many rows as it makes, and a fast one made 1 KB of garbage a step (1.9 GB
// of a 64-rank report's 3.4 GB). A step has room for the cells of the one
// before it, not the doubling append would give (8 for 5 phases).
func (p *Process) newRow(index int) *Step {
	cells := 0
	if len(p.steps) > 0 {
		cells = len(p.steps[len(p.steps)-1].Phases)
	}
	var st *Step
	var phases []Cell
	if n := len(p.spare); n > 0 {
		st, p.spare[n-1], p.spare = p.spare[n-1], nil, p.spare[:n-1]
		phases = st.Phases
	} else {
		st = new(Step)
	}
	if cap(phases) < cells {
		phases = make([]Cell, 0, cells)
	}
	st.reset(index, phases)
	return st
}

func (p *Process) updatePeak(index int) {
	st := p.step(index)
	p.settle(st)
	sum := st.peak()
	for k := len(p.peaks) - 1; k >= 0 && k >= len(p.peaks)-4; k-- {
		if p.peaks[k].Index == index {
			p.peaks[k] = sum
			p.totals.observe(sum, false)
			return
		}
	}
	p.peaks = append(roomFor(p.peaks, p.limits.peaks+p.limits.peaks/10+1), sum)
	p.totals.observe(sum, true)
	// Keep the first summaries (warmup lives there) and the newest ones
	// (growth is judged there); drop a block from the middle at a time.
	if keep := p.limits.peaks; len(p.peaks) > keep+keep/10 {
		head := keep / 10
		drop := len(p.peaks) - keep
		p.peaks = append(p.peaks[:head], p.peaks[head+drop:]...)
	}
}

func (p *Process) anatomy(at time.Time, m *ipc.Message) {
	a := Anatomy{
		At: at, Step: m.Step, Params: m.Params, Device: m.Device,
		Weights: Bytes(m.Weights), Gradients: Bytes(m.Gradients), Optimizer: Bytes(m.Optimizer),
		Activations: Unknown, BatchSize: Unknown,
		Tokens: -1, ActivationsStep: m.Step, ActivationsBatch: -1, ActivationsTokens: -1,
		ActivationsSource: m.ActivationsSource,
	}
	if m.Activations != nil {
		a.Activations = Bytes(*m.Activations)
	}
	if m.BatchSize != nil {
		a.BatchSize = Bytes(*m.BatchSize)
		a.ActivationsBatch = *m.BatchSize
	}
	if m.Tokens != nil {
		a.Tokens = *m.Tokens
		a.ActivationsTokens = *m.Tokens
	}
	if m.ActivationsStep != nil {
		a.ActivationsStep = *m.ActivationsStep
	}
	if m.ActivationsBatch != nil {
		a.ActivationsBatch = *m.ActivationsBatch
	}
	if m.ActivationsTokens != nil {
		a.ActivationsTokens = *m.ActivationsTokens
	}
	a.SavedActivations = Unknown
	if m.Saved != nil && m.Activations != nil {
		a.Saved, a.SavedStep, a.SavedActivations = m.Saved, a.ActivationsStep, Bytes(*m.Activations)
	} else if prev := p.Anatomy; prev != nil && prev.Saved != nil &&
		(m.ActivationsSource == "scaled" || m.ActivationsSource == "measured") {
		// A scaled anatomy, and a measured one that did not take the split
		// (the hook takes it only where it could have changed), keep the
		// last split, with the step and total it was taken at.
		a.Saved, a.SavedStep, a.SavedActivations = prev.Saved, prev.SavedStep, prev.SavedActivations
	}
	if len(p.Anatomies) >= p.limits.anatomies {
		p.Anatomies = append(p.Anatomies[:1], p.Anatomies[2:]...)
	}
	p.Anatomies = append(p.Anatomies, a)
	p.Anatomy = &p.Anatomies[len(p.Anatomies)-1]
}

func (p *Process) mark(at time.Time, m *ipc.Message) {
	if m.Mem != nil {
		p.readBetween(m.Step, m.Mem, true)
	}
	if len(p.Marks) >= p.limits.marks {
		p.Marks = append(p.Marks[:0], p.Marks[1:]...)
	}
	p.Marks = append(p.Marks, Mark{At: at, Name: m.Name, Step: m.Step, Mem: copyMem(m.Mem)})
}

// Spans returns the recent phase spans, oldest first, open ones included.
// The slice is the store's: read it, do not keep it across Apply calls.
func (p *Process) Spans() []Span { return p.spans }

// Steps returns the step table: the first steps of the session and the most
// recent ones, in order. Read-only, valid until the next Apply.
func (p *Process) Steps() []*Step { return p.steps }

// StepPeaks returns one summary per step: every step of a session of up to
// 10,000 steps; beyond, the first 1,000 and the newest ones.
func (p *Process) StepPeaks() []StepPeak { return p.peaks }

// Label is a short name for the process: "rank 0 · pid 4242".
func (p *Process) Label() string {
	h := &p.Hello
	if h.Rank != nil {
		return "rank " + itoa(*h.Rank) + " · pid " + itoa(h.PID)
	}
	return "pid " + itoa(h.PID)
}

// printable returns s with every control character (C0, DEL, C1) as '?':
// a watch name comes from the hook and is shown in the TUI, the report and
// the exports, so no escape sequence in it may reach a terminal.
func printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
}
