package metrics

import (
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// procLabels label every per-process metric: where the process runs and
// which hook session it is (a process that calls watch() again starts a
// new session). rank is "" without torch.distributed; device is the CUDA
// index, else the memory source's kind (cpu, mps, xpu; "" from a hook that
// names none), uuid the device's UUID as NVML and dcgm-exporter spell it;
// job_id the job the hello names (hello.job.id, "" when none), so a job's
// ranks on many monitors are one selector.
var procLabels = []string{"host", "pid", "rank", "device", "uuid", "session", "job_id"}

// gpuLabels label the NVML metrics: the monitor's host and the device.
var gpuLabels = []string{"host", "uuid"}

// desc makes a metric's descriptor and lists it in the catalogue.
func desc(name, help string, labels []string, extra ...string) *prometheus.Desc {
	all := append(append([]string{}, labels...), extra...)
	catalog = append(catalog, Family{Name: "vramscope_" + name, Help: help, Labels: all})
	return prometheus.NewDesc("vramscope_"+name, help, all, nil)
}

// The metrics. docs/prometheus.md has the same list.
var (
	dAllocated    = desc("allocated_bytes", "Memory allocated to tensors now: the device's caching allocator (CUDA: torch.cuda.memory_allocated), MPS's current allocation, or a CPU run's resident set size (RSS).", procLabels)
	dReserved     = desc("reserved_bytes", "Memory reserved now: the caching allocator's from the driver (CUDA: torch.cuda.memory_reserved), MPS's driver allocation, or a CPU run's RSS (equal to allocated).", procLabels)
	dMaxAllocated = desc("max_allocated_bytes", "The peak counter as last read (CUDA: torch.cuda.max_memory_allocated; a CPU run: the peak RSS); reset per phase when the hook resets peaks.", procLabels)
	dPeakAlloc    = desc("peak_allocated_bytes", "Session peak of allocated memory: the highest max_allocated read so far.", procLabels)
	dPeakRes      = desc("peak_reserved_bytes", "Session peak of reserved memory.", procLabels)
	dStep         = desc("step", "The optimizer step in progress (the newest phase's step index).", procLabels)
	dPhase        = desc("phase_info", "1 for the automatic phase in progress (zero_grad, forward, loss, backward, step).", procLabels, "phase")
	dLastStep     = desc("last_step", "Index of the newest finished step, the one the step and phase peaks below describe.", procLabels)
	dStepPeak     = desc("step_peak_allocated_bytes", "Allocated peak of the newest finished step; label peak says how it is known: exact, inferred (the step repeats an exact one) or bound (a lower bound: the largest value seen).", procLabels, "peak")
	dStepHeld     = desc("step_held_bytes", "Memory held between steps: allocated at the newest finished step's end (a leak is this rising).", procLabels)
	dStepPeakRes  = desc("step_peak_reserved_bytes", "Reserved peak of the newest finished step.", procLabels)
	dPhasePeak    = desc("phase_peak_allocated_bytes", "Allocated peak of each phase of the newest finished step; label peak is exact or bound (a lower bound).", procLabels, "phase", "peak")
	dConnected    = desc("connected", "1 while the process's hook is connected.", procLabels)
	dLost         = desc("lost_messages_total", "Hook messages that never reached the monitor (gaps in their sequence numbers).", procLabels)
	dDuplicates   = desc("duplicate_messages_total", "Hook messages received twice (a replayed backlog) and ignored.", procLabels)
	dHookDropped  = desc("hook_dropped_total", "Messages the hook dropped because its queue was full (it never blocks training).", procLabels)
	dHookEvicted  = desc("hook_evicted_total", "Messages the hook evicted from its backlog while no monitor listened.", procLabels)
	dSendErrors   = desc("hook_send_errors_total", "Socket send errors the hook counted.", procLabels)
	dFailed       = desc("failed_steps_total", "Steps that failed while the process went on: a phase of theirs raised and the loop caught the error (an out-of-memory error whose batch it skipped).", procLabels)
	dHolder       = desc("census_holder_bytes", "The largest holder of other tensors in the hook's newest census of live tensors (docs/census.md): its tensors' memory and the saved tensors still in the autograd graphs it keeps; label holder is its name, at most 64 bytes.", procLabels, "holder")

	dDevUsed   = desc("nvml_device_used_bytes", "NVML: device memory used.", gpuLabels)
	dDevTotal  = desc("nvml_device_total_bytes", "NVML: device memory total.", gpuLabels)
	dProcUsed  = desc("nvml_process_used_bytes", "NVML: memory the driver charges each compute process on the device (any process, hooked or not).", gpuLabels, "pid")
	dProcesses = desc("processes", "Training processes (hook sessions) known to the monitor.", nil)
	dBad       = desc("bad_messages_total", "Bad or orphan hook messages the monitor skipped.", nil)
	dExpDrop   = desc("exporter_dropped_total", "Events the exporter could not apply because its queue was full.", nil)
)

// collector is the Exporter as a prometheus.Collector. It is unchecked
// (Describe sends nothing): its label values come and go with processes.
type collector struct{ e *Exporter }

func (collector) Describe(chan<- *prometheus.Desc) {}

// Collect applies the queued events, then reads the store.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applyLocked()
	s := e.store
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	count := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(dProcesses, float64(len(s.Processes())))
	count(dBad, uint64(s.Errors))
	count(dExpDrop, e.src.Overflow())
	for _, p := range shown(s.Processes()) {
		l := labelsOf(p)
		collectProcess(p, l, gauge, count)
		collectIdentity(p, l, gauge)
		collectDiagnosis(s, p, l, gauge)
	}
	for _, g := range s.GPUs() {
		if g.Last.At.IsZero() {
			continue
		}
		gauge(dDevUsed, float64(g.Last.Used), e.host, g.UUID)
		if g.Total.Known() {
			gauge(dDevTotal, float64(g.Total), e.host, g.UUID)
		}
		for _, pr := range g.Processes {
			gauge(dProcUsed, float64(pr.Used), e.host, g.UUID, strconv.Itoa(pr.PID))
		}
	}
}

// MaxProcesses bounds the processes whose series a scrape carries (the
// store may hold more: it never forgets a connected one), and
// MaxPhaseLabels the values of the phase label per process: 2,000
// processes, or a thousand user phase names in one step, made as many
// series a scrape. vramscope_processes still counts them all.
const (
	MaxProcesses   = 256
	MaxPhaseLabels = 32
)

// shown is ps, or the MaxProcesses of them heard from last (connected
// first), in the store's order.
func shown(ps []*session.Process) []*session.Process {
	if len(ps) <= MaxProcesses {
		return ps
	}
	rank := append([]*session.Process(nil), ps...)
	sort.SliceStable(rank, func(i, j int) bool {
		if rank[i].Connected != rank[j].Connected {
			return rank[i].Connected
		}
		return rank[i].Last.After(rank[j].Last)
	})
	keep := map[*session.Process]bool{}
	for _, p := range rank[:MaxProcesses] {
		keep[p] = true
	}
	out := make([]*session.Process, 0, MaxProcesses)
	for _, p := range ps {
		if keep[p] {
			out = append(out, p)
		}
	}
	return out
}

func labelsOf(p *session.Process) []string {
	h := &p.Hello
	rank, device, uuid := "", "", ""
	if h.Rank != nil {
		rank = strconv.Itoa(*h.Rank)
	}
	if h.CUDA != nil {
		device, uuid = strconv.Itoa(h.CUDA.Index), h.CUDA.UUID
	} else {
		device = ipc.SourceKind(h) // cpu, mps, xpu: the memory read, "" from older hooks
	}
	job := ""
	if h.Job != nil {
		job = h.Job.ID
	}
	return []string{h.Host, strconv.Itoa(h.PID), rank, device, uuid, p.Key, job}
}

type emit func(d *prometheus.Desc, v float64, labels ...string)
type emitCount func(d *prometheus.Desc, v uint64, labels ...string)

func collectProcess(p *session.Process, l []string, gauge emit, count emitCount) {
	with := func(extra string) []string { return append(append([]string{}, l...), extra) }
	connected := 0.0
	if p.Connected {
		connected = 1
	}
	gauge(dConnected, connected, l...)
	if name, b, ok := largestHolder(p); ok {
		gauge(dHolder, float64(b), with(name)...)
	}
	count(dLost, p.Lost, l...)
	count(dDuplicates, p.Duplicates, l...)
	count(dHookDropped, p.Stats.Dropped, l...)
	count(dHookEvicted, p.Stats.Evicted, l...)
	count(dSendErrors, p.Stats.SendErrors, l...)
	count(dFailed, uint64(diagnose.FailedCount(p)), l...)
	if m := p.Mem; m != nil {
		gauge(dAllocated, float64(m.Allocated), l...)
		gauge(dReserved, float64(m.Reserved), l...)
		gauge(dMaxAllocated, float64(m.MaxAllocated), l...)
	}
	if v := p.MaxAllocated.Max(); v >= 0 {
		gauge(dPeakAlloc, float64(max(v, p.Allocated.Max())), l...)
	}
	if v := p.Reserved.Max(); v >= 0 {
		gauge(dPeakRes, float64(v), l...)
	}
	if sp := p.Spans(); len(sp) > 0 {
		gauge(dStep, float64(sp[len(sp)-1].Step), l...)
		for i := len(sp) - 1; i >= 0; i-- {
			if sp[i].Open() && !sp[i].User {
				gauge(dPhase, 1, with(sp[i].Name)...)
				break
			}
		}
	}
	if st := lastFinished(p); st != nil {
		gauge(dLastStep, float64(st.Index), l...)
		if st.PeakAllocated.Known() {
			gauge(dStepPeak, float64(st.PeakAllocated), with(st.Peak.String())...)
		}
		if st.Held.Known() {
			gauge(dStepHeld, float64(st.Held), l...)
		}
		if st.PeakReserved.Known() {
			gauge(dStepPeakRes, float64(st.PeakReserved), l...)
		}
		row, repeats := phaseRow(p, st)
		seen := map[string]bool{}
		for i := range row.Phases {
			c := &row.Phases[i]
			if c.PeakAllocated.Known() && !seen[c.Name] && len(seen) < MaxPhaseLabels {
				seen[c.Name] = true
				how := session.Exact
				switch {
				case c.Inferred || repeats:
					how = session.Inferred
				case !c.Exact:
					how = session.Bound
				}
				gauge(dPhasePeak, float64(c.PeakAllocated), append(with(c.Name), how.String())...)
			}
		}
	}
}

// phaseRow is the row whose phases are st's: st itself, or, when st's
// phases carry no peak of their own (a plain step: the hook read it once)
// and it repeats step SameAs, that step's row, as the report shows "same
// phases as step k"; repeats says which. A row the store no longer keeps
// leaves st's own.
func phaseRow(p *session.Process, st *session.Step) (*session.Step, bool) {
	if st.SameAs < 0 {
		return st, false
	}
	for i := range st.Phases {
		if st.Phases[i].PeakAllocated.Known() {
			return st, false
		}
	}
	for _, r := range p.Steps() {
		if r.Index == st.SameAs {
			return r, true
		}
	}
	return st, false
}

// lastFinished is the newest finished step: the newest row once its
// optimizer step has ended (or its process has gone) with no automatic
// phase of it still open, else the row before it. It used to be always the
// row before: after a 100-step run it stayed at 98 while the TUI showed
// step 99 complete.
func lastFinished(p *session.Process) *session.Step {
	st := p.Steps()
	if len(st) == 0 {
		return nil
	}
	if newest := st[len(st)-1]; newest.Failed == "" && finished(p, newest) {
		return newest
	}
	// The one before, past those that failed (a batch size search fails
	// step after step): a failed step never finished.
	for k := len(st) - 2; k >= 0; k-- {
		if st[k].Failed == "" {
			return st[k]
		}
	}
	return nil
}

// finished reports whether the newest step st is over.
func finished(p *session.Process, st *session.Step) bool {
	sp := p.Spans()
	for i := len(sp) - 1; i >= 0 && sp[i].Step >= st.Index; i-- {
		if sp[i].Open() && !sp[i].User && sp[i].Step == st.Index {
			return false
		}
	}
	if !p.Connected || p.End != nil {
		return true
	}
	c := st.Cell("step")
	return c != nil && !c.End.IsZero()
}

// MaxHolderLabel bounds the holder label's value, in bytes: one series per
// process, whatever the names a process gives its variables.
const MaxHolderLabel = 64

// largestHolder is the name (clipped to MaxHolderLabel bytes on a
// character boundary) and bytes of the newest census's largest holder.
func largestHolder(p *session.Process) (string, int64, bool) {
	if len(p.Censuses) == 0 {
		return "", 0, false
	}
	c := &p.Censuses[len(p.Censuses)-1]
	best := -1
	var most int64
	for i := range c.Holders {
		if b := c.Holders[i].Bytes + c.Holders[i].GraphSaved; best < 0 || b > most {
			best, most = i, b
		}
	}
	if best < 0 {
		return "", 0, false
	}
	name := c.Holders[best].Name
	for len(name) > MaxHolderLabel {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name, most, true
}
