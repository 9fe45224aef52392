package demo

import (
	"fmt"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// Hook settings the simulated hook reports in its hello.
const (
	SampleHz         = 50
	samplePeriod     = time.Second / SampleHz
	statsPeriod      = time.Second
	hookVersion      = "0.1.0"
	activationsEvery = 100
	// noiseBytes is the hook's smallest noise (pyhook's NOISE_BYTES): a
	// plain step within max(noiseBytes, 1 % of the peak) of the last
	// breakdown step is the same.
	noiseBytes int64 = 2 << 20
	batchSize        = 32
	// monoStart is the virtual time.monotonic() at the hello, in µs.
	monoStart int64 = 1000 * 1e6
)

// DefaultWall is the wall-clock start Config uses when Wall is zero, so
// generated runs are reproducible: 2025-11-22 07:00:00 UTC.
var DefaultWall = time.Unix(1763794800, 0).UTC()

// Config is what one generated rank is.
type Config struct {
	// Steps is how many optimizer steps Generate produces; 0 or less gives a
	// run with no step (hello and goodbye only). NewGenerator ignores it.
	Steps int
	// Rank is this process's rank; a negative rank counts as 0.
	Rank int
	// WorldSize is the number of ranks. At most 1 means a plain, single
	// process launch: the hello's rank fields are null. It is raised to
	// Rank+1 when smaller.
	WorldSize int
	// Wall is the wall-clock time of the hello (the start of the virtual
	// clock); the zero time means DefaultWall.
	Wall time.Time
	// HostName is the hello's host name; "" means DefaultHostName.
	HostName string
	// Job is the hello's job identity; nil sends none.
	Job *ipc.Job
	// EveryPhase reads every phase end of every step, zero_grad's
	// included, and sends no plain steps: what the hook does on a CPU run
	// (docs/protocol.md, "Memory sources"). False reads as on CUDA.
	EveryPhase bool
	// Host makes the rank a CPU run as today's hook sends it: mem_source
	// cpu with exact peaks, no CUDA device, allocated = reserved (the RSS),
	// every phase read (EveryPhase), no samples, the anatomy on cpu.
	Host bool
}

// DefaultHostName is the host name of a generated rank unless
// Config.HostName says.
const DefaultHostName = "trainbox-demo"

func (c Config) normalized() Config {
	if c.Rank < 0 {
		c.Rank = 0
	}
	if c.Rank > 0 && c.WorldSize <= c.Rank {
		c.WorldSize = c.Rank + 1
	}
	if c.Wall.IsZero() {
		c.Wall = DefaultWall
	}
	if c.HostName == "" {
		c.HostName = DefaultHostName
	}
	c.EveryPhase = c.EveryPhase || c.Host
	return c
}

// Generate returns the whole message sequence of one rank running sc for
// cfg.Steps steps: hello, then per step the phase edges, 50 Hz samples,
// about one stats a second and the anatomy, then goodbye. The result
// depends only on its arguments.
func Generate(sc Scenario, cfg Config) []ipc.Message {
	g := NewGenerator(sc, cfg)
	msgs := g.Start(nil)
	for i := 0; i < cfg.Steps; i++ {
		msgs = g.Next(msgs)
	}
	return append(msgs, g.Goodbye("exit"))
}

// Generator produces a rank's messages one step at a time, so an endless
// run holds one step in memory. It is deterministic and not safe for
// concurrent use.
type Generator struct {
	sc     Scenario
	cfg    Config
	offset int64 // RankOffset × rank

	started    bool
	seq        uint64
	now        time.Duration // virtual time since the hello
	nextSample time.Duration
	nextStats  time.Duration
	step       int
	mem        ipc.Mem // the allocator now; its max_* are the peaks since the last reset

	// The exact-peaks hook's plan (docs/protocol.md, "Exact peaks"):
	// whether this step reads its phases (a breakdown step) or only where
	// it closes (a plain step), and the last breakdown step's number, peak
	// and held memory that plain steps are compared with.
	breakdown        bool
	refStep          int
	refPeak, refHeld int64
	haveRef, moved   bool
}

// NewGenerator returns a generator for one rank of sc. The zero Scenario is
// the default one.
func NewGenerator(sc Scenario, cfg Config) *Generator {
	sc = sc.orDefault()
	cfg = cfg.normalized()
	g := &Generator{sc: sc, cfg: cfg, offset: int64(cfg.Rank) * RankOffset}
	g.nextSample = samplePeriod
	g.nextStats = statsPeriod
	a, r := sc.initAlloc+g.offset, sc.initReserved+g.offset
	g.mem = ipc.Mem{Allocated: a, MaxAllocated: a, Reserved: r, MaxReserved: r}
	g.breakdown = true
	return g
}

// Steps returns how many steps the generator has produced.
func (g *Generator) Steps() int { return g.step }

// Start appends the hello to dst, once; later calls append nothing. Next
// calls it by itself.
func (g *Generator) Start(dst []ipc.Message) []ipc.Message {
	if g.started {
		return dst
	}
	g.started = true
	m := g.msg(ipc.TypeHello)
	pid := PIDBase + g.cfg.Rank
	m.Session = fmt.Sprintf("demo-%s-r%d-%d", g.sc.Name, g.cfg.Rank, g.cfg.Wall.Unix())
	m.PID = pid
	m.NSpid = []int{pid}
	m.Host = g.cfg.HostName
	m.Job = g.cfg.Job
	m.Argv = []string{"train_seq2seq.py", "--demo"}
	if g.cfg.WorldSize > 1 {
		rank, local, world := g.cfg.Rank, g.cfg.Rank, g.cfg.WorldSize
		m.Rank, m.LocalRank, m.WorldSize = &rank, &local, &world
	}
	m.Torch = "2.3.1+cu121"
	m.CUDA = &ipc.CUDADevice{Index: 0, UUID: DeviceUUID, Name: DeviceName, Total: DeviceTotal}
	if g.cfg.Host {
		m.CUDA = nil
	}
	m.Clock = &ipc.Clock{Mono: m.T, Wall: unixSeconds(g.cfg.Wall)}
	m.MemSource = &ipc.MemSource{Kind: ipc.SourceCUDA, Peaks: ipc.PeaksExact}
	if g.cfg.Host {
		m.MemSource.Kind = ipc.SourceCPU
	}
	m.Hook = &ipc.HookConfig{Version: hookVersion, SampleHz: SampleHz, ActivationsEvery: activationsEvery, ExactPeaks: true}
	return append(dst, m)
}

// Next appends the messages of the next step to dst (the hello first, on the
// first call) and returns it. It reads as today's hook does with exact
// peaks: a breakdown step (steps 0–2, one in activationsEvery halfway
// between two measured steps, and the step after a plain step that moved
// beyond the noise) reads at every
// phase end but zero_grad's after step 2, and its loss and backward begins
// repeat the end read just before them; a plain step reads once, at its
// step end, with span "step" and same_as when its peak and held memory are
// those of the last breakdown step within the noise. Every read resets the
// peak counters.
func (g *Generator) Next(dst []ipc.Message) []ipc.Message {
	dst = g.Start(dst)
	p := g.sc.steps(g.step)
	step := g.step

	dst = g.advance(dst, segment{t1: g.now + inputGap, a0: g.mem.Allocated, a1: g.mem.Allocated,
		r0: g.mem.Reserved, r1: g.mem.Reserved, t0: g.now})
	var zeroGradEnd, lossEnd, peak, held int64
	var last *ipc.Mem // the read the next begin edge repeats, nil when none
	for i, spec := range p {
		begin := g.edge(phaseNames[i], step, ipc.EdgeBegin)
		if g.breakdown && (phaseNames[i] == "loss" || phaseNames[i] == "backward") {
			begin.Mem = last
		}
		dst = append(dst, begin)
		dst = g.advance(dst, g.segment(spec, phaseDurs[i], phasePeakAt[i]))
		end := g.edge(phaseNames[i], step, ipc.EdgeEnd)
		last = nil
		if (g.breakdown && (i > 0 || step <= 2 || g.cfg.EveryPhase)) || i == len(p)-1 {
			last = g.read()
			end.Mem = last
			peak, held = max(peak, last.MaxAllocated), last.Allocated
		}
		if i == len(p)-1 && !g.breakdown {
			end.Span, end.SameAs = ipc.SpanStep, g.compare(peak, held)
		}
		dst = append(dst, end)
		switch i {
		case 0:
			zeroGradEnd = g.mem.Allocated
		case 2:
			lossEnd = g.mem.Allocated
		}
	}
	if g.breakdown {
		g.refStep, g.refPeak, g.refHeld, g.haveRef, g.moved = step, peak, held, true, false
	}
	if step <= 2 || step%activationsEvery == 0 {
		dst = append(dst, g.anatomy(step, lossEnd-zeroGradEnd))
	}
	g.step++
	next := g.step
	g.breakdown = next <= 2 || next%activationsEvery == activationsEvery/2 || g.moved || g.cfg.EveryPhase
	return dst
}

// snapshot is the memory as the hook reads it now: the allocator, or on a
// CPU run the RSS (allocated = reserved, one peak).
func (g *Generator) snapshot() ipc.Mem {
	m := g.mem
	if g.cfg.Host {
		m.Reserved, m.MaxReserved = m.Allocated, m.MaxAllocated
	}
	return m
}

// read is one read of the allocator for a phase edge: the snapshot now,
// after which the peak counters are reset to the current values.
func (g *Generator) read() *ipc.Mem {
	mem := g.snapshot()
	g.mem.MaxAllocated, g.mem.MaxReserved = g.mem.Allocated, g.mem.Reserved
	return &mem
}

// compare is the hook's check of a plain step against the last breakdown
// step: its same_as when the step's peak and held memory are both within
// the noise of that step's, nil (and the next step reads its phases) when
// either moved beyond it.
func (g *Generator) compare(peak, held int64) *int {
	noise := max(noiseBytes, g.refPeak/100)
	g.moved = !g.haveRef || peak-g.refPeak > noise || g.refPeak-peak > noise || held-g.refHeld > noise || g.refHeld-held > noise
	if g.moved {
		return nil
	}
	k := g.refStep
	return &k
}

// Goodbye returns the goodbye that ends the run now.
func (g *Generator) Goodbye(reason string) ipc.Message {
	m := g.msg(ipc.TypeGoodbye)
	m.Reason = reason
	m.Stats = stats(m.Seq)
	return m
}

// goodbyeAfter is the goodbye a run stopped early sends right after last:
// the messages generated but never sent were never created.
func goodbyeAfter(last ipc.Message, reason string) ipc.Message {
	seq := last.Seq + 1
	return ipc.Message{V: ipc.Version, Type: ipc.TypeGoodbye, Seq: seq, T: last.T, Reason: reason, Stats: stats(seq)}
}

func stats(seq uint64) *ipc.Stats {
	return &ipc.Stats{Created: seq + 1, Connects: 1}
}

// msg starts a message of type typ at the current virtual time and takes
// the next seq.
func (g *Generator) msg(typ string) ipc.Message {
	m := ipc.Message{V: ipc.Version, Type: typ, Seq: g.seq, T: mono(g.now)}
	g.seq++
	return m
}

// unixSeconds is t as time.time() gives it; adding the fraction to the whole
// seconds keeps .25 exact where UnixNano()/1e9 would not.
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// mono is the virtual time.monotonic() at d after the hello. Going through
// whole microseconds keeps the JSON short (1000.02, not 1000.0200000000001).
func mono(d time.Duration) float64 {
	return float64(monoStart+d.Microseconds()) / 1e6
}

func (g *Generator) edge(name string, step int, edge string) ipc.Message {
	m := g.msg(ipc.TypePhase)
	m.Name, m.Step, m.Edge = name, step, edge
	return m
}

func (g *Generator) anatomy(step int, activations int64) ipc.Message {
	m := g.msg(ipc.TypeAnatomy)
	m.Step = step
	m.Weights = g.sc.weights + g.offset // the rank's extra buffer counts as weights
	m.Gradients = g.sc.weights
	m.Optimizer = g.sc.optimizer
	m.Activations = &activations
	bs := int64(batchSize)
	m.BatchSize = &bs
	m.Params = g.sc.weights / 4
	m.Device = "cuda"
	if g.cfg.Host {
		m.Device = "cpu"
	}
	return m
}

// advance emits the samples and stats due before seg ends (a sample due
// exactly at the end comes after the edges there) and moves to its end.
func (g *Generator) advance(dst []ipc.Message, seg segment) []ipc.Message {
	for {
		if g.nextSample < seg.t1 && g.nextSample <= g.nextStats {
			g.now = g.nextSample
			g.set(seg.at(g.now))
			if !g.cfg.Host { // a CPU run's hook sends no samples
				m := g.msg(ipc.TypeSample)
				mem := g.snapshot()
				m.Mem = &mem
				dst = append(dst, m)
			}
			g.nextSample += samplePeriod
			continue
		}
		if g.nextStats < seg.t1 {
			g.now = g.nextStats
			m := g.msg(ipc.TypeStats)
			m.Stats = stats(m.Seq)
			dst = append(dst, m)
			g.nextStats += statsPeriod
			continue
		}
		break
	}
	g.now = seg.t1
	g.set(seg.a1, seg.r1)
	return dst
}

// set moves the allocator to allocated a and reserved r, raising the peak
// counters as the real ones would.
func (g *Generator) set(a, r int64) {
	g.mem.Allocated, g.mem.Reserved = a, r
	g.mem.MaxAllocated = max(g.mem.MaxAllocated, a)
	g.mem.MaxReserved = max(g.mem.MaxReserved, r)
}
