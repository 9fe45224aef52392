// Package diff compares two sessions, for example a run before and after
// activation checkpointing or a batch-size change: processes paired by
// rank (else in order), steps aligned by index and phases by name. It
// reports per-phase peak deltas, the change in the steady-state peak and
// the memory-anatomy layers that moved, as text or JSON (schema
// vramscope.diff/v1, docs/diff.md).
package diff

import (
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Schema names the JSON layout.
const Schema = "vramscope.diff/v1"

// MovedFloor is the smallest change of an anatomy layer that counts as
// moved; a layer also has to move by at least MovedShare of the larger
// peak, so allocator noise on a big run does not count.
const (
	MovedFloor = session.Bytes(1 << 20)
	MovedShare = 0.01
)

// Result is the comparison of two sessions.
type Result struct {
	Schema string `json:"schema"`
	A      string `json:"a"`
	B      string `json:"b"`
	// Pairs are the processes compared, A's with B's.
	Pairs []Pair `json:"pairs"`
	// UnpairedA and UnpairedB count processes with no counterpart.
	UnpairedA int `json:"unpaired_a"`
	UnpairedB int `json:"unpaired_b"`
}

// Side names one process of a pair.
type Side struct {
	Label   string `json:"label"`
	Session string `json:"session"`
	PID     int    `json:"pid"`
	Rank    *int   `json:"rank"`
	Steps   int    `json:"steps"`
	// Pattern is the diagnosis's shape of the step peaks.
	Pattern diagnose.Pattern `json:"pattern"`
	// Models counts the steps of each watch name (a GAN's D and G), empty
	// when the hook named none; NoOptimizer: no step had a step phase.
	Models      []session.ModelSteps `json:"models"`
	NoOptimizer bool                 `json:"no_optimizer"`
	// Model is the watch name of its steps (the model's class name unless
	// watch(name=...) said otherwise; several joined with "+"), "" when
	// the hook named none; Params the parameter elements the hook counted,
	// 0 without an anatomy; Memory the memory source's kind (cuda, cpu,
	// ...; "" from older hooks' CPU runs).
	Model  string `json:"model"`
	Params int64  `json:"params"`
	Memory string `json:"memory"`
	// AtOOM is what was alive when the side died of an out-of-memory
	// error, by category (nil when it did not, or sent no census then).
	AtOOM *diagnose.AtOOM `json:"at_oom"`
}

// Pair is the comparison of one process of A with one of B. Deltas are
// B − A: positive means B uses more.
type Pair struct {
	A Side `json:"a"`
	B Side `json:"b"`
	// CommonSteps is how many step indices both have; the phase peaks
	// below are over those steps only, so a longer run is not penalised
	// for its extra steps.
	CommonSteps int `json:"common_steps"`
	// Phases are per-phase peaks, in the order the phases first appear.
	Phases []Phase `json:"phases"`
	// Steady is the steady-state (or highest) peak of each side, from the
	// diagnosis.
	Steady Steady `json:"steady"`
	// Layers are the anatomy at each side's session peak; Moved lists the
	// names of those that changed by more than MovedFloor and MovedShare.
	Layers []Layer  `json:"layers"`
	Moved  []string `json:"moved"`
	// Saved is what autograd saved for backward in each side's last
	// measurement (the model's forward and the loss's); Modules are the
	// by-module entries of either side (the loss among them), and
	// ModulesMoved the labels of those that changed by ModuleMovedShare of
	// the larger Saved or more. Empty when a side sent no split.
	Saved        Delta    `json:"saved"`
	Modules      []Module `json:"modules"`
	ModulesMoved []string `json:"modules_moved"`
	// Holders are the holders of other tensors in either side's newest
	// census, a side without the holder at 0; HoldersMoved the names of
	// those that moved by HolderMovedFloor or more.
	Holders      []Holder `json:"holders"`
	HoldersMoved []string `json:"holders_moved"`
	// Cells are every aligned step × phase cell.
	Cells []Cell `json:"cells"`
	// Differs says what differs between the two runs' setups, one item
	// each ("model Sequential → GPT2LMHeadModel", "parameters 0.3 M →
	// 124.4 M", "memory cuda → cpu"); empty when nothing does. Different
	// models make the per-phase deltas a comparison of different work.
	Differs []string `json:"differs"`
}

// ModuleMovedShare is the share of the larger side's saved bytes a module
// entry must change by to count as moved.
const ModuleMovedShare = 0.05

// Module is one by-module entry on both sides: A or B is Unknown when the
// entry is not in that side's top list and that list left some out.
type Module struct {
	Label string `json:"label"`
	Delta
}

// Phase is one phase's peak allocated and reserved over the common steps.
type Phase struct {
	Phase         string  `json:"phase"`
	PeakAllocated Delta   `json:"peak_allocated"`
	PeakReserved  Delta   `json:"peak_reserved"`
	PeakNVML      Delta   `json:"peak_nvml"`
	WorstStep     int     `json:"worst_step"` // the step whose allocated peak changed most, -1 if none
	WorstChange   *int64  `json:"worst_change"`
	DurationA     float64 `json:"mean_duration_a_s"`
	DurationB     float64 `json:"mean_duration_b_s"`
}

// Delta is a value on each side and B − A in bytes; Change is nil (null)
// when either side is unknown. (A change can be negative, so it is not a
// session.Bytes, whose negative values mean unknown.)
//
// ABound and BBound mark a side that is a lower bound (the largest value
// seen, not the peak): Change is then null too, since a difference of
// bounds is no figure.
type Delta struct {
	A      session.Bytes `json:"a"`
	B      session.Bytes `json:"b"`
	Change *int64        `json:"change"`
	ABound bool          `json:"a_bound"`
	BBound bool          `json:"b_bound"`
}

// boundDelta is delta with each side's boundness.
func boundDelta(a, b session.Bytes, aBound, bBound bool) Delta {
	d := delta(a, b)
	d.ABound, d.BBound = aBound && a.Known(), bBound && b.Known()
	if d.ABound || d.BBound {
		d.Change = nil
	}
	return d
}

// Steady compares the diagnoses' memory needs.
type Steady struct {
	// SteadyA and SteadyB say whether each figure is a steady state's
	// peak (true) or the highest seen (growth, too few steps).
	SteadyA   bool  `json:"steady_a"`
	SteadyB   bool  `json:"steady_b"`
	Allocated Delta `json:"allocated"`
	Reserved  Delta `json:"reserved"`
	// Peak is the session's allocated peak on each side.
	Peak Delta `json:"peak"`
	// KnownA and KnownB say how each side's allocated need is known
	// (exact, inferred from an exact step it repeats, or a bound).
	KnownA diagnose.Known `json:"allocated_known_a"`
	KnownB diagnose.Known `json:"allocated_known_b"`
}

// Layer is one anatomy layer at each side's peak.
type Layer struct {
	Name string `json:"name"`
	Delta
}

// Cell is one step × phase cell of both sides.
type Cell struct {
	Step          int    `json:"step"`
	Phase         string `json:"phase"`
	PeakAllocated Delta  `json:"peak_allocated"`
	PeakReserved  Delta  `json:"peak_reserved"`
}

// Compare pairs the processes of a and b and compares each pair. nameA and
// nameB label the sides (file names).
func Compare(a, b *session.Store, nameA, nameB string) Result {
	r := Result{Schema: Schema, A: nameA, B: nameB, Pairs: []Pair{}}
	pa, pb := ordered(a), ordered(b)
	n := min(len(pa), len(pb))
	for i := 0; i < n; i++ {
		r.Pairs = append(r.Pairs, ComparePair(a, pa[i], b, pb[i]))
	}
	r.UnpairedA, r.UnpairedB = len(pa)-n, len(pb)-n
	return r
}

// ordered lists a store's processes with steps by rank, then pid
// (session.RankLess); processes without any step (a hook that never trained)
// are left out.
func ordered(s *session.Store) []*session.Process {
	var ps []*session.Process
	for _, p := range s.ByRank() {
		if len(p.StepPeaks()) > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

func delta(a, b session.Bytes) Delta {
	d := Delta{A: a, B: b}
	if a.Known() && b.Known() {
		c := int64(b - a)
		d.Change = &c
	}
	return d
}

func side(p *session.Process, d *diagnose.Diagnosis) Side {
	models, _ := p.ModelSteps()
	if models == nil {
		models = []session.ModelSteps{}
	}
	s := Side{Label: p.Label(), Session: p.Key, PID: p.Hello.PID, Rank: p.Hello.Rank,
		Steps: len(p.StepPeaks()), Pattern: d.Pattern, Models: models, NoOptimizer: p.NoOptimizer(),
		Memory: ipc.SourceKind(&p.Hello), AtOOM: d.AtOOM}
	names := make([]string, 0, len(models))
	for _, m := range models {
		names = append(names, m.Model)
	}
	s.Model = strings.Join(names, "+")
	if a := p.Anatomy; a != nil {
		s.Params = a.Params
	}
	return s
}

// differs lists what differs between the setups of two sides.
func differs(a, b *Side) []string {
	out := []string{}
	if a.Model != "" && b.Model != "" && a.Model != b.Model {
		out = append(out, "model "+textesc.String(a.Model)+" → "+textesc.String(b.Model))
	}
	if a.Params > 0 && b.Params > 0 && a.Params != b.Params {
		out = append(out, "parameters "+millions(a.Params)+" → "+millions(b.Params))
	}
	if a.Memory != b.Memory {
		out = append(out, "memory "+orNone(a.Memory)+" → "+orNone(b.Memory))
	}
	return out
}

func millions(n int64) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " M" }

func orNone(kind string) string {
	if kind == "" {
		return "none"
	}
	return textesc.String(kind)
}

// ComparePair compares process pa of store a with pb of store b.
func ComparePair(a *session.Store, pa *session.Process, b *session.Store, pb *session.Process) Pair {
	da, db := diagnose.Diagnose(a, pa), diagnose.Diagnose(b, pb)
	pr := Pair{A: side(pa, &da), B: side(pb, &db), Phases: []Phase{}, Moved: []string{}, Cells: []Cell{}}
	pr.Differs = differs(&pr.A, &pr.B)
	pr.Steady = Steady{
		SteadyA: da.Need.Steady, SteadyB: db.Need.Steady,
		Allocated: boundDelta(da.Need.Allocated, db.Need.Allocated, !da.Need.AllocatedKnown.Is.Stated(), !db.Need.AllocatedKnown.Is.Stated()),
		Reserved:  delta(da.Need.Reserved, db.Need.Reserved),
		Peak:      boundDelta(da.Peak.Allocated, db.Peak.Allocated, !da.Peak.Exact, !db.Peak.Exact),
		KnownA:    da.Need.AllocatedKnown, KnownB: db.Need.AllocatedKnown,
	}
	pr.alignSteps(pa, pb)
	la, lb := da.Layers.Peak.List(), db.Layers.Peak.List()
	floor := max(int64(MovedFloor), int64(MovedShare*float64(max(da.Peak.Allocated, db.Peak.Allocated))))
	for i := range la {
		l := Layer{Name: la[i].Name, Delta: delta(la[i].Bytes, lb[i].Bytes)}
		pr.Layers = append(pr.Layers, l)
		if c := l.Change; c != nil && abs(*c) >= floor {
			pr.Moved = append(pr.Moved, l.Name)
		}
	}
	pr.compareModules(diagnose.HoldersOf(pa.Anatomy), diagnose.HoldersOf(pb.Anatomy))
	pr.compareHolders(pa, pb)
	return pr
}

// compareModules pairs the by-module entries of both sides by label.
func (pr *Pair) compareModules(ha, hb *diagnose.Holders) {
	pr.Saved = delta(session.Unknown, session.Unknown)
	pr.Modules, pr.ModulesMoved = []Module{}, []string{}
	if ha == nil || hb == nil {
		if ha != nil {
			pr.Saved.A = ha.Saved
		}
		if hb != nil {
			pr.Saved.B = hb.Saved
		}
		return
	}
	pr.Saved = delta(ha.Saved, hb.Saved)
	// an entry missing from a complete list is 0; from a cut one, unknown
	missing := func(h *diagnose.Holders) session.Bytes {
		if h.Rest.Count == 0 {
			return 0
		}
		return session.Unknown
	}
	index := map[string]int{}
	var labels []string
	va, vb := map[string]session.Bytes{}, map[string]session.Bytes{}
	for _, side := range []struct {
		h *diagnose.Holders
		v map[string]session.Bytes
	}{{ha, va}, {hb, vb}} {
		for _, e := range side.h.Modules {
			l := e.Label()
			if _, ok := index[l]; !ok {
				index[l] = len(labels)
				labels = append(labels, l)
			}
			side.v[l] = e.Bytes
		}
	}
	floor := int64(ModuleMovedShare * float64(max(ha.Saved, hb.Saved)))
	for _, l := range labels {
		a, ok := va[l]
		if !ok {
			a = missing(ha)
		}
		b, ok := vb[l]
		if !ok {
			b = missing(hb)
		}
		m := Module{Label: l, Delta: delta(a, b)}
		pr.Modules = append(pr.Modules, m)
		if c := m.Change; c != nil && abs(*c) >= max(floor, 1) {
			pr.ModulesMoved = append(pr.ModulesMoved, l)
		}
	}
}

// alignSteps fills the cells and per-phase peaks from the step indices
// both processes have in their step tables.
func (pr *Pair) alignSteps(pa, pb *session.Process) {
	byIndex := map[int]*session.Step{}
	for _, st := range pb.Steps() {
		byIndex[st.Index] = st
	}
	phases := map[string]*phaseAcc{}
	var order []string
	for _, sa := range pa.Steps() {
		sb := byIndex[sa.Index]
		if sb == nil {
			continue
		}
		pr.CommonSteps++
		for _, name := range phaseNames(sa, sb) {
			ca, cb := sa.Cell(name), sb.Cell(name)
			acc := phases[name]
			if acc == nil {
				acc = newAcc()
				phases[name] = acc
				order = append(order, name)
			}
			cell := Cell{Step: sa.Index, Phase: name,
				PeakAllocated: boundDelta(peak(ca, allocOf), peak(cb, allocOf), ca != nil && !ca.Exact && !ca.Inferred, cb != nil && !cb.Exact && !cb.Inferred),
				PeakReserved:  delta(peak(ca, resOf), peak(cb, resOf))}
			pr.Cells = append(pr.Cells, cell)
			acc.add(sa.Index, ca, cb, cell.PeakAllocated.Change)
		}
	}
	for _, name := range order {
		pr.Phases = append(pr.Phases, phases[name].phase(name))
	}
}

// phaseNames lists the phases of two aligned steps: A's in order, then
// those only B has.
func phaseNames(a, b *session.Step) []string {
	var names []string
	seen := map[string]bool{}
	for _, st := range []*session.Step{a, b} {
		for i := range st.Phases {
			if n := st.Phases[i].Name; !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}

func allocOf(c *session.Cell) session.Bytes { return c.PeakAllocated }
func resOf(c *session.Cell) session.Bytes   { return c.PeakReserved }

func peak(c *session.Cell, f func(*session.Cell) session.Bytes) session.Bytes {
	if c == nil {
		return session.Unknown
	}
	return f(c)
}

type phaseAcc struct {
	alloc, res, gpu [2]session.Bytes
	bound           [2]bool // a cell's allocated peak was a lower bound
	worstStep       int
	worst           *int64
	dur             [2]float64
	n               [2]int
}

func newAcc() *phaseAcc {
	u := [2]session.Bytes{session.Unknown, session.Unknown}
	return &phaseAcc{alloc: u, res: u, gpu: u, worstStep: -1}
}

func (a *phaseAcc) add(step int, ca, cb *session.Cell, change *int64) {
	for i, c := range []*session.Cell{ca, cb} {
		if c == nil {
			continue
		}
		a.alloc[i] = a.alloc[i].Max(c.PeakAllocated)
		a.bound[i] = a.bound[i] || c.PeakAllocated.Known() && !c.Exact && !c.Inferred
		a.res[i] = a.res[i].Max(c.PeakReserved)
		a.gpu[i] = a.gpu[i].Max(c.PeakGPU)
		a.dur[i] += c.Busy.Seconds()
		a.n[i]++
	}
	if change != nil && (a.worst == nil || abs(*change) > abs(*a.worst)) {
		a.worst, a.worstStep = change, step
	}
}

func abs(b int64) int64 {
	if b < 0 {
		return -b
	}
	return b
}

func (a *phaseAcc) phase(name string) Phase {
	p := Phase{Phase: name,
		PeakAllocated: boundDelta(a.alloc[0], a.alloc[1], a.bound[0], a.bound[1]),
		PeakReserved:  delta(a.res[0], a.res[1]),
		PeakNVML:      delta(a.gpu[0], a.gpu[1]),
		WorstStep:     a.worstStep, WorstChange: a.worst}
	if a.n[0] > 0 {
		p.DurationA = a.dur[0] / float64(a.n[0])
	}
	if a.n[1] > 0 {
		p.DurationB = a.dur[1] / float64(a.n[1])
	}
	return p
}
