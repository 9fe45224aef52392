package session

import (
	"slices"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// Span is one phase as it happened: from its begin edge to its end edge.
type Span struct {
	Name  string
	Step  int
	Micro int
	User  bool
	Start time.Time
	End   time.Time // zero while the phase is open
	// Begin and Last are the allocator snapshots at the edges (not Taken on
	// CPU; of the end one, what the step table reads). A begin edge that
	// carries no snapshot takes the newest one before it, so an exact peak
	// may include the user code just before the phase.
	Begin MemRead
	Last  EndRead
	// PeakAllocated and PeakReserved are the largest values in the phase.
	PeakAllocated, PeakReserved Bytes
	// Exact is true when the peak is the allocator's own peak counter (it
	// grew during the phase, or the hook resets peaks at each phase), false
	// when it is the largest value seen (edges and samples): a lower bound.
	Exact bool
	// PeakGPU is the largest NVML figure (process or device used) in the
	// phase: the reading in effect at its start and those taken during it.
	// Unknown without NVML.
	PeakGPU Bytes
	// GPUDuring is true when an NVML reading was taken during the phase;
	// false when PeakGPU is only the reading in effect at its start (the
	// process list is read at 1 Hz: short phases often have none).
	GPUDuring bool
	// PeakNonPyTorch is the largest non-PyTorch figure (a process reading
	// minus the hook's reserved at that moment) in effect during the phase.
	PeakNonPyTorch Bytes
	// Batch and Tokens are the input size a training forward reported at
	// its begin (protocol input field), -1 when unknown.
	Batch, Tokens int64
	// Unended is true for a phase the monitor closed at End because too
	// many were open (Process.Unended): its end edge never came.
	Unended bool
	// StepRead is the end read of a plain step (protocol span "step"):
	// its max_allocated is the whole step's exact peak, not this phase's.
	// SameAs is the hook's same_as beside it, -1 when none.
	StepRead PlainRead
	SameAs   int
	// gap is true when messages were lost since the read before this
	// phase's end: with an exact-peaks hook its peak is then a lower bound.
	gap bool
	// Model is the name of the watch that sent the phase (protocol model
	// field), empty for user phases and older hooks.
	Model string
	// Grad is true for the hook's evaluation a forward of which ran with
	// gradients enabled (protocol grad field, on its end edge).
	Grad bool
	// Failed is why an error unwound this automatic phase (protocol failed
	// field on its end edge: ipc.FailedOOM, ipc.FailedError), "" when none.
	Failed string
	// autoAt is, for a user phase, how many automatic phases had begun
	// when it began (Process.autoBegins): more at its end, and automatic
	// phases ran inside it.
	autoAt uint64
}

// MemRead is an allocator snapshot a span keeps, by value, so that the
// store keeps no pointer to a message's own: a report reads a recording
// into reused messages (record.Reader.Fold), where one allocation for
// every snapshot was 440 MB of garbage for 64 busy ranks. Taken is false
// where there is none.
type MemRead struct {
	ipc.Mem
	Taken bool
}

// readOf is m kept as a MemRead (not Taken when m is nil).
func readOf(m *ipc.Mem) MemRead {
	if m == nil {
		return MemRead{}
	}
	return MemRead{*m, true}
}

// EndRead is what a span keeps of the snapshot at its end, Taken false
// where there is none: a span is kept by value, and a live store holds a
// thousand of each process's.
type EndRead struct {
	Allocated, MaxAllocated, Reserved int64
	Taken                             bool
}

// endOf is m kept as an EndRead.
func endOf(m *ipc.Mem) EndRead {
	if m == nil {
		return EndRead{}
	}
	return EndRead{m.Allocated, m.MaxAllocated, m.Reserved, true}
}

// PlainRead is what a span keeps of a plain step's end read (the whole
// step's peak counters), Taken false where there is none.
type PlainRead struct {
	MaxAllocated, MaxReserved int64
	Taken                     bool
}

// plainOf is m kept as a PlainRead.
func plainOf(m *ipc.Mem) PlainRead {
	if m == nil {
		return PlainRead{}
	}
	return PlainRead{m.MaxAllocated, m.MaxReserved, true}
}

// copyMem is a copy of m that the store owns, nil when m is nil.
func copyMem(m *ipc.Mem) *ipc.Mem {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}

// read reports whether the span's end carried a read of its own (not a
// plain step's read, which is the whole step's).
func (sp *Span) read() bool { return sp.Last.Taken && !sp.StepRead.Taken }

// Open reports whether the phase has not ended yet.
func (sp *Span) Open() bool { return sp.End.IsZero() }

// observe folds one snapshot into the running peaks of an open span.
func (sp *Span) observe(m *ipc.Mem) {
	if m == nil {
		return
	}
	sp.PeakAllocated = sp.PeakAllocated.Max(Bytes(m.Allocated))
	sp.PeakReserved = sp.PeakReserved.Max(Bytes(m.Reserved))
}

// close ends the span with its end snapshot and settles its peaks.
func (sp *Span) close(at time.Time, m *ipc.Mem, resetPeaks bool) {
	sp.End = at
	sp.Last = endOf(m)
	sp.observe(m)
	if m == nil || sp.StepRead.Taken || resetPeaks && sp.gap {
		// A plain step's only read holds the step's peak, not the phase's;
		// after lost messages the counter was reset by a read never seen.
		return
	}
	if resetPeaks {
		// Reset at the previous read: the counter is the peak since then
		// (a mark inside the phase reset it too: mark folds its read in).
		sp.PeakAllocated, sp.Exact = sp.PeakAllocated.Max(Bytes(m.MaxAllocated)), true
		sp.PeakReserved = sp.PeakReserved.Max(Bytes(m.MaxReserved))
		return
	}
	// Without resets the counter is the exact peak when it grew during the
	// phase; otherwise the phase stayed below an earlier peak and what we
	// saw is the best we know.
	if !sp.Begin.Taken {
		return
	}
	if m.MaxAllocated > sp.Begin.MaxAllocated {
		sp.PeakAllocated, sp.Exact = Bytes(m.MaxAllocated), true
	}
	if m.MaxReserved > sp.Begin.MaxReserved {
		sp.PeakReserved = Bytes(m.MaxReserved)
	}
}

// Cell is one phase of one step in the step × phase table. Micro-steps of
// the same phase (gradient accumulation) are merged into one cell.
type Cell struct {
	Name  string
	User  bool
	Start time.Time
	End   time.Time
	Count int // spans merged: micro-steps, or repeated forwards
	// Busy is the sum of the merged spans' own durations: with gradient
	// accumulation the phase's time, where End − Start would also hold the
	// other phases run between its micro-steps.
	Busy time.Duration
	// Values at the end of the cell's last span.
	AllocatedEnd, MaxAllocatedEnd, ReservedEnd Bytes
	// Peaks over the cell's spans that were read; PeakAllocated and
	// PeakReserved stay Unknown when none was (Read).
	PeakAllocated, PeakReserved, PeakGPU, PeakNonPyTorch Bytes
	Exact                                                bool // read, and every read span had an exact peak
	// Read is true when a span of the cell carried a read of its own at
	// its end. The hook leaves some phases unread by design (zero_grad
	// after step 2, every phase of a plain step but the step read, which
	// is the whole step's): such a cell is "not read", neither a bound nor
	// a zero; a later read's interval covers it (exact.go).
	Read bool
	// Inferred is true when the cell's peak was a lower bound and its step
	// repeats an exact step (Step.Peak Inferred) whose cell of the same
	// phase is exact: PeakAllocated is then that cell's peak.
	Inferred bool
	// GPUDuring is true when an NVML reading was taken during one of the
	// merged spans (Span.GPUDuring).
	GPUDuring bool
	// Grad is true when one of the merged spans is an evaluation that ran
	// with gradients enabled (Span.Grad).
	Grad bool
	// Failed is why one of the merged spans failed (Span.Failed), "" when
	// none did.
	Failed string
	// Rise is, for the step cell, what its spans allocated: the sum over
	// them of allocated at a span's end less allocated at the end of the
	// step's automatic phase before it, none below zero (the hook reads no
	// phase's begin):
	// a backward, or for a later span a zero_grad (one between the steps
	// of an update split between optimizers). Unknown for other cells,
	// and where a span's start or end was not read.
	Rise Bytes
}

// follows lists, for each automatic phase, the automatic phases the hook
// begins it where they end: loss at the forward's end, backward at the
// loss's and the step at the backward's (it reads none of those begins:
// docs/hook.md, "Phase detection"); a forward follows zero_grad, or a
// backward in gradient accumulation.
var follows = map[string][]string{
	"forward":  {"zero_grad", "backward"},
	"loss":     {"forward"},
	"backward": {"loss"},
	"step":     {"backward"},
}

// Follows says whether the hook begins a phase named name where the
// automatic phase prev, right before it in the step, ended: allocated at
// prev's end is then allocated at name's start.
func Follows(prev, name string) bool {
	return slices.Contains(follows[name], prev)
}

// Step is one optimizer step: its phases in the order they first began.
type Step struct {
	Index  int
	Start  time.Time
	End    time.Time
	Micro  int // micro-steps (forward/backward passes before the optimizer step)
	Phases []Cell
	// Peaks over the step's phases.
	PeakAllocated, PeakReserved, PeakGPU Bytes
	// Held is allocated at the step's closing read (the end of its last
	// automatic phase that carried one, normally the optimizer step): the
	// memory held between steps (weights, optimizer state, gradients kept,
	// anything kept across steps).
	Held   Bytes
	heldAt time.Time
	// Peak says how PeakAllocated is known (exact.go); SameAs is the step
	// whose phases this one repeats (-1 none), Within how far its peak and
	// held memory are from that step's (0: to the byte), Bound the largest
	// allocated this step's own reads show (a lower bound of its peak).
	Peak   Exactness
	SameAs int
	Within Bytes
	Bound  Bytes
	// plain is a plain step's exact peak (span "step"), Unknown otherwise;
	// hookSame the hook's same_as, -1 when none; gap a lost message in it.
	plain    Bytes
	hookSame int
	gap      bool
	// inner is the largest peak of the reads inside a plain step that are
	// no phase end of its own (a mark, a user phase's begin, between its
	// automatic phases): the step's phases before such a read are in it,
	// not in the step's closing read (Process.readBetween).
	inner Bytes
	// Batch and Tokens are the largest input size its training forwards
	// reported, -1 when unknown.
	Batch, Tokens int64
	// Model names the step: the watch whose optimizer stepped (the model
	// of its step phase), else the watch of its first automatic phase;
	// empty from older hooks (docs/hook.md, "Several models").
	Model string
	// Stepped is true when the step had a step phase (an optimizer step);
	// a watch without an optimizer ends its steps at its next training
	// forward after a backward (docs/hook.md, "Loop shapes").
	Stepped bool
	// Failed is why the step did not finish though the process went on: a
	// phase of it raised (Span.Failed) and the loop caught the error (an
	// out-of-memory error whose batch fairseq skips, or whose batch size
	// accelerate's find_executable_batch_size makes smaller); "" for a step that
	// did not fail.
	Failed  string
	counted string // the Model counted in Process.models
	// autoName and autoEnd are the name of the step's last automatic span
	// added and allocated at its end (Unknown: not read), for Cell.Rise.
	autoName string
	autoEnd  Bytes
}

// Duration is the time from the first phase begin to the last phase end.
func (st *Step) Duration() time.Duration {
	if st.End.Before(st.Start) {
		return 0
	}
	return st.End.Sub(st.Start)
}

// Cell returns the step's cell for a phase name, nil when absent.
func (st *Step) Cell(name string) *Cell {
	for i := range st.Phases {
		if st.Phases[i].Name == name {
			return &st.Phases[i]
		}
	}
	return nil
}

// add merges a finished span into the step.
func (st *Step) add(sp *Span) {
	if st.Start.IsZero() || sp.Start.Before(st.Start) {
		st.Start = sp.Start
	}
	if sp.End.After(st.End) {
		st.End = sp.End
	}
	switch {
	case sp.User || sp.Name == "step":
		// The step phase carries the number of backward passes done, not
		// a micro-step of its own.
	case sp.Name == "zero_grad":
		// Neither does zero_grad: 0 at a step's start, the step's count
		// after its update (the HF Trainer's model.zero_grad()).
		st.Micro = max(st.Micro, sp.Micro)
	default:
		st.Micro = max(st.Micro, sp.Micro+1)
	}
	if !sp.User {
		if sp.Name == "step" {
			st.Stepped = true
			if sp.Model != "" {
				st.Model = sp.Model
			}
		} else if st.Model == "" && !st.Stepped {
			st.Model = sp.Model
		}
	}
	c := st.Cell(sp.Name)
	if c == nil {
		st.Phases = append(st.Phases, Cell{
			Name: sp.Name, User: sp.User, Start: sp.Start,
			AllocatedEnd: Unknown, MaxAllocatedEnd: Unknown, ReservedEnd: Unknown,
			PeakAllocated: Unknown, PeakReserved: Unknown, PeakGPU: Unknown, PeakNonPyTorch: Unknown,
			Rise: Unknown,
		})
		c = &st.Phases[len(st.Phases)-1]
		if sp.Name == "step" && !sp.User {
			c.Rise = 0
		}
	}
	if c.Rise.Known() {
		// A first step span after anything but a backward (a zero_grad,
		// the forward and backward between unseen) starts where no read was.
		after := Follows(st.autoName, sp.Name) || st.autoName == "zero_grad" && c.Count > 0
		if after && st.autoEnd.Known() && sp.Last.Taken {
			c.Rise += max(0, Bytes(sp.Last.Allocated)-st.autoEnd)
		} else {
			c.Rise = Unknown
		}
	}
	c.Count++
	c.End = sp.End
	if sp.End.After(sp.Start) {
		c.Busy += sp.End.Sub(sp.Start)
	}
	if m := &sp.Last; m.Taken {
		c.AllocatedEnd, c.MaxAllocatedEnd, c.ReservedEnd = Bytes(m.Allocated), Bytes(m.MaxAllocated), Bytes(m.Reserved)
	}
	if sp.read() {
		c.PeakAllocated = c.PeakAllocated.Max(sp.PeakAllocated)
		c.PeakReserved = c.PeakReserved.Max(sp.PeakReserved)
		c.Exact = sp.Exact && (c.Exact || !c.Read)
		c.Read = true
	}
	c.PeakGPU = c.PeakGPU.Max(sp.PeakGPU)
	c.GPUDuring = c.GPUDuring || sp.GPUDuring
	c.Grad = c.Grad || sp.Grad
	if sp.Failed != "" {
		c.Failed = sp.Failed
		if st.Failed == "" {
			st.Failed = sp.Failed
		}
	}
	c.PeakNonPyTorch = c.PeakNonPyTorch.Max(sp.PeakNonPyTorch)
	st.Batch, st.Tokens = max(st.Batch, sp.Batch), max(st.Tokens, sp.Tokens)
	if sp.User {
		return // user phases (eval, checkpoint) do not set the training step's peak
	}
	st.autoName, st.autoEnd = sp.Name, Unknown
	if sp.Last.Taken {
		st.autoEnd = Bytes(sp.Last.Allocated)
	}
	st.Bound = st.Bound.Max(sp.PeakAllocated)
	st.PeakReserved = st.PeakReserved.Max(sp.PeakReserved)
	st.PeakGPU = st.PeakGPU.Max(sp.PeakGPU)
	if m := &sp.Last; m.Taken && !sp.End.Before(st.heldAt) {
		st.Held, st.heldAt = Bytes(m.Allocated), sp.End
	}
	if m := &sp.StepRead; m.Taken {
		st.plain = Bytes(m.MaxAllocated)
		st.PeakReserved = st.PeakReserved.Max(Bytes(m.MaxReserved))
		st.hookSame = sp.SameAs
	}
	st.gap = st.gap || sp.gap
}

// reset makes st the empty row of step index, its cells kept in the
// array of phases (which it clears).
func (st *Step) reset(index int, phases []Cell) {
	clear(phases[:cap(phases)])
	*st = Step{Index: index, Phases: phases[:0], PeakAllocated: Unknown, PeakReserved: Unknown, PeakGPU: Unknown, Held: Unknown,
		Batch: -1, Tokens: -1, SameAs: -1, Bound: Unknown, plain: Unknown, inner: Unknown, hookSame: -1, autoEnd: Unknown}
}

// StepPeak is the compact summary kept for every step of a session, also
// after the full Step has left the bounded table.
type StepPeak struct {
	Index                                int
	Start                                time.Time
	Duration                             time.Duration
	PeakAllocated, PeakReserved, PeakGPU Bytes
	// Held is the memory held between steps (Step.Held); Batch and Tokens
	// the step's input size, -1 when unknown.
	Held          Bytes
	Batch, Tokens int64
	// Peak, SameAs, Within and Bound say how PeakAllocated is known
	// (Step's fields of the same names).
	Peak   Exactness
	SameAs int
	Within Bytes
	Bound  Bytes
	// Failed is Step.Failed: the step did not finish.
	Failed string
	// Stepped is Step.Stepped: the step had an optimizer step.
	Stepped bool
	// Model is Step.Model: the watch the step is named after.
	Model string
}

func (st *Step) peak() StepPeak {
	return StepPeak{st.Index, st.Start, st.Duration(), st.PeakAllocated, st.PeakReserved, st.PeakGPU, st.Held, st.Batch, st.Tokens,
		st.Peak, st.SameAs, st.Within, st.Bound, st.Failed, st.Stepped, st.Model}
}
