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
	// Host is the hello's host name; "" means DefaultHost.
	Host string
	// Job is the hello's job identity; nil sends none.
	Job *ipc.Job
}

// DefaultHost is the host name of a generated rank unless Config.Host says.
const DefaultHost = "trainbox-demo"

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
	if c.Host == "" {
		c.Host = DefaultHost
	}
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
	mem        ipc.Mem
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
	m.Host = g.cfg.Host
	m.Job = g.cfg.Job
	m.Argv = []string{"train_seq2seq.py", "--demo"}
	if g.cfg.WorldSize > 1 {
		rank, local, world := g.cfg.Rank, g.cfg.Rank, g.cfg.WorldSize
		m.Rank, m.LocalRank, m.WorldSize = &rank, &local, &world
	}
	m.Torch = "2.3.1+cu121"
	m.CUDA = &ipc.CUDADevice{Index: 0, UUID: DeviceUUID, Name: DeviceName, Total: DeviceTotal}
	m.Clock = &ipc.Clock{Mono: m.T, Wall: unixSeconds(g.cfg.Wall)}
	m.Hook = &ipc.HookConfig{Version: hookVersion, SampleHz: SampleHz, ActivationsEvery: activationsEvery}
	return append(dst, m)
}

// Next appends the messages of the next step to dst (the hello first, on the
// first call) and returns it.
func (g *Generator) Next(dst []ipc.Message) []ipc.Message {
	dst = g.Start(dst)
	p := g.sc.steps(g.step)
	step := g.step

	dst = g.advance(dst, segment{t1: g.now + inputGap, a0: g.mem.Allocated, a1: g.mem.Allocated,
		r0: g.mem.Reserved, r1: g.mem.Reserved, t0: g.now})
	var zeroGradEnd, lossEnd int64
	for i, spec := range p {
		dst = append(dst, g.edge(phaseNames[i], step, ipc.EdgeBegin))
		dst = g.advance(dst, g.segment(spec, phaseDurs[i], phasePeakAt[i]))
		dst = append(dst, g.edge(phaseNames[i], step, ipc.EdgeEnd))
		switch i {
		case 0:
			zeroGradEnd = g.mem.Allocated
		case 2:
			lossEnd = g.mem.Allocated
		}
	}
	if step <= 2 || step%activationsEvery == 0 {
		dst = append(dst, g.anatomy(step, lossEnd-zeroGradEnd))
	}
	g.step++
	return dst
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
	mem := g.mem
	m.Mem = &mem
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
	return m
}

// advance emits the samples and stats due before seg ends (a sample due
// exactly at the end comes after the edges there) and moves to its end.
func (g *Generator) advance(dst []ipc.Message, seg segment) []ipc.Message {
	for {
		if g.nextSample < seg.t1 && g.nextSample <= g.nextStats {
			g.now = g.nextSample
			g.set(seg.at(g.now))
			m := g.msg(ipc.TypeSample)
			mem := g.mem
			m.Mem = &mem
			dst = append(dst, m)
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
