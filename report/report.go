// Package report summarizes a session.Store as text (the classic
// step × phase print-out, then totals, anatomy and diagnosis) or as JSON
// (schema vramscope.report/v1, docs/report.md). It does no I/O of its own
// beyond the writer it is given.
package report

import (
	"time"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Schema names the JSON layout. Additive changes (new fields) keep it;
// removing or changing the meaning of a field makes a v2.
const Schema = "vramscope.report/v1"

// Report is the plain data model of a report: what WriteText prints and
// WriteJSON encodes.
type Report struct {
	Schema string `json:"schema"`
	// Start is the session start (the earliest event or hook time), UTC;
	// nil for an empty store.
	Start *time.Time `json:"start"`
	// DurationS is the time from Start to the newest event, seconds.
	DurationS float64 `json:"duration_s"`
	// Errors counts the bad or orphan messages the store skipped.
	Errors int `json:"errors"`
	// Begins says what the recording holds when it was started
	// mid-session (its header's meta.begins); "" when it holds the session
	// from its start. The caller that read the header sets it.
	Begins    string    `json:"begins,omitempty"`
	Processes []Process `json:"processes"`
	// pending builds the processes as they are written when the report
	// streams (Stream); nil when Processes holds them.
	pending *pending
}

// Process is one training process (one hook session).
type Process struct {
	Session   string   `json:"session"`
	PID       int      `json:"pid"`
	Rank      *int     `json:"rank"`
	LocalRank *int     `json:"local_rank"`
	WorldSize *int     `json:"world_size"`
	Host      string   `json:"host"`
	Argv      []string `json:"argv"`
	// Job is the launcher's or scheduler's job the hook read from its
	// environment (docs/protocol.md, "Job identity"), nil when none.
	Job *Job `json:"job"`
	// Torch is torch.__version__, nil when the hook did not report it.
	Torch *string `json:"torch"`
	// Device is the CUDA device, nil on CPU runs.
	Device *Device `json:"device"`
	// Hook is how the hook was configured, nil when not reported.
	Hook *Hook `json:"hook"`
	// Memory is which memory the figures read and what it cannot give.
	Memory *Memory `json:"memory"`
	// NVML says what the driver figures are: "process" (this process's
	// used memory), "device" (device used: per-process memory not visible)
	// or "" (no NVML data).
	NVML string `json:"nvml"`
	// Connected is true when the recording ended without the hook's
	// goodbye: the connection closed without one (a crash, a kill) or the
	// recording stopped while the process ran. diagnosis.end says which.
	Connected bool `json:"connected"`
	// PartialStep is the step the process ended in the middle of, left out
	// of the pattern and the totals; -1 when none.
	PartialStep int `json:"partial_step"`
	// UnfinishedStep is the last step when the process ended cleanly
	// before its update (no optimizer.step() after its last backward),
	// its row kept and left out of the totals and the pattern; -1 when none.
	UnfinishedStep int `json:"unfinished_step"`
	// Lost counts messages that never arrived (seq gaps), Duplicates the
	// replayed ones ignored, Dropped and Evicted the hook's own losses.
	Lost       uint64 `json:"lost"`
	Duplicates uint64 `json:"duplicates"`
	Dropped    uint64 `json:"dropped"`
	Evicted    uint64 `json:"evicted"`
	// StepsTotal is the number of steps the session finished (a partial
	// step, failed ones and a last one that never updated are left out); Steps
	// holds those the store kept (its first and most recent ones, the
	// partial step included).
	StepsTotal int    `json:"steps_total"`
	Steps      []Step `json:"steps"`
	// Models counts the steps of each watch name (watch(name=...)), in the
	// order the names came; empty when the hook named none. ModelsCut is
	// true when more names came than the store counts.
	Models    []session.ModelSteps `json:"models"`
	ModelsCut bool                 `json:"models_cut,omitempty"`
	// NoOptimizer is true when no step had a step phase: the watch has no
	// optimizer, and a step ends at the model's next training forward
	// after a backward (docs/hook.md, "Loop shapes").
	NoOptimizer bool    `json:"no_optimizer"`
	Totals      Totals  `json:"totals"`
	Anatomy     Anatomy `json:"anatomy"`
	// Census is the newest census of the live tensors, nil when none came.
	Census    *Census   `json:"census"`
	Diagnosis Diagnosis `json:"diagnosis"`
}

// Job is which job of a launcher or scheduler a process belongs to (the
// hello's job object, as the report's own type); a field is "" when the
// hook did not know it.
type Job struct {
	ID        string `json:"id"`
	Source    string `json:"source"`
	Step      string `json:"step"`
	Node      string `json:"node"`
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
}

// jobOf is the report's copy of a hello's job.
func jobOf(j *ipc.Job) *Job {
	if j == nil {
		return nil
	}
	return &Job{ID: j.ID, Source: j.Source, Step: j.Step, Node: j.Node, Pod: j.Pod, Namespace: j.Namespace}
}

// Hook is how the hook was configured (the hello's hook object). It is
// the report's own type, so a change to the wire protocol changes
// vramscope.report/v1 only where this file says so.
type Hook struct {
	// Version is the hook's version.
	Version string `json:"version"`
	// SampleHz is the rate of the background allocator samples.
	SampleHz float64 `json:"sample_hz"`
	// ResetPeaks is retired: hooks send false (docs/report.md).
	ResetPeaks bool `json:"reset_peaks"`
	// ActivationsEvery is how many steps apart the hook measures the
	// saved activations.
	ActivationsEvery int `json:"activations_every"`
	// ExactPeaks is true when the hook resets the peak counters after each
	// phase or mark read, so a phase's peak is exact; omitted when false
	// (older hooks do not send it).
	ExactPeaks bool `json:"exact_peaks,omitempty"`
}

// hookOf is the report's copy of a hello's hook configuration.
func hookOf(c *ipc.HookConfig) *Hook {
	if c == nil {
		return nil
	}
	return &Hook{Version: c.Version, SampleHz: c.SampleHz, ResetPeaks: c.ResetPeaks, ActivationsEvery: c.ActivationsEvery, ExactPeaks: c.ExactPeaks}
}

// Device is the CUDA device a process runs on.
type Device struct {
	Index int           `json:"index"`
	UUID  string        `json:"uuid"`
	Name  string        `json:"name"`
	Total session.Bytes `json:"total"`
}

// Step is one optimizer step and its phases, in the order they began.
type Step struct {
	Step   int     `json:"step"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Micro  int     `json:"micro"`
	// Model names the step: the watch whose optimizer stepped (empty
	// from hooks that name none).
	Model  string  `json:"model,omitempty"`
	Phases []Phase `json:"phases"`
	// PeakAllocated is the step's peak and Peak (peak_known) how it is known: "exact",
	// "inferred" (from step SameAs, whose phases ended at the same bytes)
	// or "bound" (the largest value seen: a lower bound). SameAs is also
	// set beside an exact plain step the hook found the same as step
	// SameAs, Within bytes apart (0: to the byte); -1 and null otherwise.
	PeakAllocated session.Bytes     `json:"peak_allocated"`
	Peak          session.Exactness `json:"peak_known"`
	SameAs        int               `json:"same_as"`
	Within        session.Bytes     `json:"within"`
	// Held is the memory held between steps: allocated at the step's
	// closing read.
	Held session.Bytes `json:"held"`
	// Plain is true when the hook read the step once (span "step"): its
	// phases carry no reads of their own.
	Plain bool `json:"plain"`
	// Moved is true for a plain step the hook found beyond noise of its
	// last breakdown step (no same_as sent): the next step is read by phase.
	Moved bool `json:"moved"`
	// Skipped is true for a finished step of a process with an optimizer
	// whose optimizer step did not run (a GradScaler that found inf
	// gradients skips it).
	Skipped bool `json:"skipped"`
	// Failed is why the step did not finish though the process went on
	// ("oom" or "error": a phase of it raised and the loop caught the
	// error; docs/hook.md, "A step that failed"), "" for a step that did
	// not fail.
	Failed string `json:"failed"`
}

// Phase is one cell of the step × phase table. Byte values are Unknown
// (null) without their source.
type Phase struct {
	Phase  string  `json:"phase"`
	User   bool    `json:"user"`
	Count  int     `json:"count"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// DurationS is the time spent in the phase: its merged spans' own
	// durations summed (Count micro-steps), not EndS − StartS.
	DurationS float64 `json:"duration_s"`
	// AllocatedEnd, MaxAllocatedEnd and ReservedEnd are the allocator's
	// allocated, max_allocated and reserved at the phase's end.
	AllocatedEnd    session.Bytes `json:"allocated_end"`
	MaxAllocatedEnd session.Bytes `json:"max_allocated_end"`
	ReservedEnd     session.Bytes `json:"reserved_end"`
	// PeakAllocated and PeakReserved are the peaks in the phase;
	// PeakExact is false when PeakAllocated is a lower bound.
	PeakAllocated session.Bytes `json:"peak_allocated"`
	PeakReserved  session.Bytes `json:"peak_reserved"`
	PeakExact     bool          `json:"peak_exact"`
	// PeakInferred is true when PeakAllocated is the same phase's exact
	// peak in the step this step repeats (steps[].same_as).
	PeakInferred bool `json:"peak_inferred"`
	// Read is false for a phase the hook did not read by design (zero_grad
	// after the first steps, the phases of a plain step): its peaks are
	// null, neither a bound nor a zero; the step's peak covers it.
	Read bool `json:"read"`
	// NVMLPeak is the largest driver figure in the phase; NonPyTorch is
	// NVMLPeak − PeakReserved (only when NVML is "process").
	NVMLPeak   session.Bytes `json:"nvml_peak"`
	NonPyTorch session.Bytes `json:"non_pytorch"`
	// NVMLStale is true when no NVML reading was taken during the phase:
	// NVMLPeak is then the reading in effect when it began, not a figure
	// of the phase.
	NVMLStale bool `json:"nvml_stale"`
}

// Totals summarize a process over the whole session.
type Totals struct {
	PeakAllocated      session.Bytes `json:"peak_allocated"`
	PeakAllocatedStep  int           `json:"peak_allocated_step"`
	PeakAllocatedPhase string        `json:"peak_allocated_phase"`
	// PeakAllocatedPhaseAs is the step whose phases a peak step read once
	// repeats, its phase taken from there; -1 when the phase is its own.
	PeakAllocatedPhaseAs int           `json:"peak_allocated_phase_as"`
	PeakReserved         session.Bytes `json:"peak_reserved"`
	PeakReservedStep     int           `json:"peak_reserved_step"`
	PeakReservedPhase    string        `json:"peak_reserved_phase"`
	// Steps counts the finished steps; Failed those that failed while the
	// process went on (Step.Failed), not in Steps.
	Steps     int     `json:"steps"`
	Failed    int     `json:"failed"`
	DurationS float64 `json:"duration_s"`
}

// Anatomy is the hook's newest tensor accounting and the derived layers.
type Anatomy struct {
	// Measured is the newest anatomy message, nil before the first.
	Measured *Measured `json:"measured"`
	// Now and Peak are the layers (docs/diagnosis.md).
	Now  diagnose.Layers `json:"now"`
	Peak diagnose.Layers `json:"peak"`
	// Holders is who holds the saved activations of the last measurement
	// (by module, and the loss's own); nil when the hook sent no split.
	Holders *diagnose.Holders `json:"holders"`
}

// Measured is one anatomy message as the hook sent it.
type Measured struct {
	Step        int           `json:"step"`
	Weights     session.Bytes `json:"weights"`
	Gradients   session.Bytes `json:"gradients"`
	Optimizer   session.Bytes `json:"optimizer"`
	Activations session.Bytes `json:"activations"`
	BatchSize   *int64        `json:"batch_size"`
	Params      int64         `json:"params"`
	Device      string        `json:"device"`
	// ActivationsStep, ActivationsBatch and ActivationsTokens say when and
	// at which input size Activations was measured (the step and batch of
	// the message itself for hooks that do not say); ActivationsSource is
	// "measured", "scaled" or "" (not said).
	ActivationsStep   int    `json:"activations_step"`
	ActivationsBatch  *int64 `json:"activations_batch"`
	ActivationsTokens *int64 `json:"activations_tokens"`
	ActivationsSource string `json:"activations_source"`
}

// Diagnosis is diagnose.Diagnosis with its rendered headline and lines.
type Diagnosis struct {
	diagnose.Diagnosis
	Headline string   `json:"headline"`
	Lines    []string `json:"lines"`
}

// Build reads everything the store holds into a Report.
func Build(s *session.Store) *Report {
	r, start := headOf(s)
	for _, p := range s.ByRank() {
		r.Processes = append(r.Processes, buildProcess(s, p, start))
	}
	return r
}

// headOf is the report's fields but its processes, and the session start
// the processes' times count from.
func headOf(s *session.Store) (*Report, time.Time) {
	r := &Report{Schema: Schema, Errors: s.Errors, Processes: []Process{}}
	start, last := s.Start(), s.Last()
	for _, p := range s.Processes() {
		if !p.First.IsZero() && (start.IsZero() || p.First.Before(start)) {
			start = p.First // a replayed backlog can predate the first event
		}
		if p.Last.After(last) {
			last = p.Last
		}
	}
	if !start.IsZero() {
		t := start.UTC()
		r.Start = &t
		r.DurationS = seconds(last.Sub(start))
	}
	return r, start
}

func buildProcess(s *session.Store, p *session.Process, start time.Time) Process {
	h := &p.Hello
	out := Process{
		Session: p.Key, PID: h.PID, Rank: h.Rank, LocalRank: h.LocalRank, WorldSize: h.WorldSize,
		Host: h.Host, Argv: h.Argv, Hook: hookOf(h.Hook), NVML: p.GPUSource, Connected: p.End == nil || !p.End.Goodbye, PartialStep: -1,
		Lost: p.Lost, Duplicates: p.Duplicates, Dropped: p.Stats.Dropped, Evicted: p.Stats.Evicted,
		StepsTotal: p.StepCount(), Steps: []Step{},
	}
	if h.Torch != "" {
		out.Torch = &h.Torch
	}
	out.Job = jobOf(h.Job)
	out.Memory = memoryOf(h)
	if c := h.CUDA; c != nil {
		out.Device = &Device{Index: c.Index, UUID: c.UUID, Name: c.Name, Total: session.Unknown}
		if c.Total > 0 {
			out.Device.Total = session.Bytes(c.Total)
		} else if g := s.GPUFor(p); g != nil {
			out.Device.Total = g.Total
		}
	}
	since := func(t time.Time) float64 { return seconds(t.Sub(start)) }
	noOpt, partial := p.NoOptimizer(), -1
	if e := p.End; e != nil && e.Step >= 0 {
		partial = e.Step
	}
	for _, st := range p.Steps() {
		row := Step{Step: st.Index, StartS: since(st.Start), EndS: since(st.End), Micro: st.Micro, Model: st.Model, Phases: []Phase{},
			PeakAllocated: st.PeakAllocated, Peak: st.Peak, SameAs: st.SameAs, Within: session.Unknown, Held: st.Held, Plain: st.Plain(), Moved: st.Moved(),
			Skipped: diagnose.SkippedUpdate(p, st)}
		if st.Index != partial {
			row.Failed = st.Failed // the step it ended in is its ending
		}
		if st.SameAs >= 0 {
			row.Within = st.Within
		}
		for i := range st.Phases {
			c := &st.Phases[i]
			ph := Phase{
				Phase: c.Name, User: c.User, Count: c.Count, StartS: since(c.Start), EndS: since(c.End), DurationS: seconds(c.Busy),
				AllocatedEnd: c.AllocatedEnd, MaxAllocatedEnd: c.MaxAllocatedEnd, ReservedEnd: c.ReservedEnd,
				PeakAllocated: c.PeakAllocated, PeakReserved: c.PeakReserved, PeakExact: c.Exact, PeakInferred: c.Inferred,
				Read: c.Read, NVMLPeak: c.PeakGPU, NonPyTorch: session.Unknown,
				NVMLStale: c.PeakGPU.Known() && !c.GPUDuring,
			}
			if p.GPUSource == "process" {
				ph.NonPyTorch = c.PeakNonPyTorch
			}
			row.Phases = append(row.Phases, ph)
		}
		out.Steps = append(out.Steps, row)
	}
	skip := notRun(p, partial)
	out.PartialStep, out.UnfinishedStep = partial, -1
	if skip >= 0 && skip != partial {
		out.UnfinishedStep = skip
	}
	out.Models, out.ModelsCut = modelSteps(p, skip)
	out.NoOptimizer = noOpt
	out.Totals = totals(p, out.PartialStep)
	out.StepsTotal = out.Totals.Steps // the step it died in is the ending, not a step run
	b := diagnose.LayersOf(s, p)
	out.Anatomy = Anatomy{Now: b.Now, Peak: b.Peak}
	if a := p.Anatomy; a != nil {
		m := &Measured{Step: a.Step, Weights: a.Weights, Gradients: a.Gradients, Optimizer: a.Optimizer,
			Activations: a.Activations, Params: a.Params, Device: a.Device,
			ActivationsStep: a.ActivationsStep, ActivationsSource: a.ActivationsSource}
		if a.ActivationsBatch > 0 {
			v := a.ActivationsBatch
			m.ActivationsBatch = &v
		}
		if a.ActivationsTokens > 0 {
			v := a.ActivationsTokens
			m.ActivationsTokens = &v
		}
		if a.BatchSize.Known() {
			bs := int64(a.BatchSize)
			m.BatchSize = &bs
		}
		out.Anatomy.Measured = m
		out.Anatomy.Holders = diagnose.HoldersOf(a)
	}
	out.Census = censusOf(p)
	d := diagnose.Diagnose(s, p)
	out.Diagnosis = Diagnosis{Diagnosis: d, Headline: d.Headline(), Lines: d.Lines()}
	if out.Diagnosis.Advice == nil {
		out.Diagnosis.Advice = []diagnose.Advice{}
	}
	return out
}

// notRun is the newest step when it is no step the process ran: the one
// it ended in (partial), or a last one that never reached its update
// (diagnose.UnfinishedStep); -1 when none.
func notRun(p *session.Process, partial int) int {
	if peaks := p.StepPeaks(); partial >= 0 && len(peaks) > 0 && peaks[len(peaks)-1].Index == partial {
		return partial
	}
	return diagnose.UnfinishedStep(p)
}

// modelSteps is p.ModelSteps() less step skip (notRun) when its model
// counted it, so that the names' steps add up to the totals' (a failed
// step the session counts under no name).
func modelSteps(p *session.Process, skip int) ([]session.ModelSteps, bool) {
	ms, cut := p.ModelSteps()
	if ms == nil {
		return []session.ModelSteps{}, cut
	}
	if st := diagnose.StepRow(p, skip); st != nil && st.Failed == "" {
		for i := range ms {
			if ms[i].Model == st.Model && ms[i].Steps > 0 {
				ms[i].Steps--
			}
		}
	}
	return ms, cut
}

// totals finds the session peaks over every step, leaving out step
// partial when it is the newest (-1: none), and their phases in the table.
// Steps and peaks come from the session's running totals, not from the
// per-step summaries, which are bounded.
func totals(p *session.Process, partial int) Totals {
	t := Totals{PeakAllocated: session.Unknown, PeakReserved: session.Unknown, PeakAllocatedStep: -1, PeakReservedStep: -1, PeakAllocatedPhaseAs: -1}
	t.Failed = diagnose.FailedCount(p)
	t.Steps = p.StepCount() - t.Failed
	if notRun(p, partial) >= 0 {
		t.Steps--
	}
	sp := diagnose.SessionPeakOf(p, partial)
	if sp.Allocated.PeakAllocated.Known() {
		t.PeakAllocated, t.PeakAllocatedStep = sp.Allocated.PeakAllocated, sp.Allocated.Index
	}
	if sp.Reserved.PeakReserved.Known() {
		t.PeakReserved, t.PeakReservedStep = sp.Reserved.PeakReserved, sp.Reserved.Index
	}
	t.PeakAllocatedPhaseAs = sp.AllocatedAs
	if c := sp.AllocatedCell; c != nil {
		t.PeakAllocatedPhase = c.Name
	}
	if c := sp.ReservedCell; c != nil {
		t.PeakReservedPhase = c.Name
	}
	if !p.First.IsZero() {
		t.DurationS = seconds(p.Last.Sub(p.First))
	}
	return t
}

// seconds rounds a duration to microseconds, in seconds.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Second)
}
