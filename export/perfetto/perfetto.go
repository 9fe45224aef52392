// Package perfetto writes a session.Store as a Chrome trace-event JSON file
// (the "JSON Object Format" of the Trace Event Format), which Perfetto
// (ui.perfetto.dev) and chrome://tracing both open, next to the traces
// PyTorch's profiler writes. docs/export.md describes the layout.
//
// Each training process is a trace process named by its rank, host and pid;
// its steps and automatic phases are nested complete ("X") slices on one
// thread track, user phases (eval, checkpoint) on a second; allocated, max
// allocated, reserved and the NVML figure are counter ("C") tracks; marks
// are process-scoped instant ("i") events. Each NVML device is a trace
// process of its own with a "device used" counter.
package perfetto

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// Thread ids within a process's trace process.
const (
	tidSteps = 1 // steps and the automatic phases nested in them
	tidUser  = 2 // user phases: eval, checkpoint, ...
	tidMarks = 1 // marks sit on the steps track
)

// Event is one trace event as the Trace Event Format documents it. Ts and
// Dur are microseconds from the trace's start (the store's first event).
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// Trace is the JSON object written: the events plus metadata.
type Trace struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit"`
	// OtherData is shown by the viewers as the trace's metadata.
	OtherData map[string]string `json:"otherData"`
}

// Build turns a store into a trace. meta goes into otherData (for example
// the recording's path and header).
func Build(s *session.Store, meta map[string]string) *Trace {
	b := builder{t0: origin(s), tr: &Trace{DisplayTimeUnit: "ms", OtherData: map[string]string{}}}
	for k, v := range meta {
		b.tr.OtherData[k] = v
	}
	if !b.t0.IsZero() {
		b.tr.OtherData["start"] = b.t0.UTC().Format(time.RFC3339Nano)
	}
	used := map[int]bool{}
	for i, p := range s.ByRank() {
		pid, name := p.Hello.PID, processName(p)
		if pid <= 0 || used[pid] {
			// Two hosts can share a pid, and one process can start several
			// hook sessions (a new watch() per run): each is its own track.
			pid = 1<<22 + i
			name += " · session " + p.Key
		}
		used[p.Hello.PID] = true
		b.process(p, pid, name, i)
	}
	for i, g := range s.GPUs() {
		b.gpu(g, 1<<23+i, i)
	}
	sortEvents(b.tr.TraceEvents)
	return b.tr
}

// Write builds the trace and writes it as JSON to w.
func Write(w io.Writer, s *session.Store, meta map[string]string) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := writeTrace(bw, Build(s, meta)); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}

// writeTrace writes one event a line, so a large trace stays diffable and
// grep-able.
func writeTrace(w io.Writer, tr *Trace) error {
	if _, err := io.WriteString(w, "{\"traceEvents\":[\n"); err != nil {
		return err
	}
	for i := range tr.TraceEvents {
		line, err := json.Marshal(&tr.TraceEvents[i])
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, ",\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	other, err := json.Marshal(tr.OtherData)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\n],\n\"displayTimeUnit\":%q,\n\"otherData\":%s}\n", tr.DisplayTimeUnit, other)
	return err
}

type builder struct {
	t0 time.Time
	tr *Trace
}

// origin is the trace's time zero: the earliest time anything in the store
// carries. Hook times and NVML sample times can precede the first event
// the monitor received (a backlog, a late hello), and a trace's ts must not
// be negative.
func origin(s *session.Store) time.Time {
	t0 := s.Start()
	early := func(t time.Time) {
		if !t.IsZero() && (t0.IsZero() || t.Before(t0)) {
			t0 = t
		}
	}
	first := func(sr *session.Series) {
		if at, _, ok := sr.First(); ok {
			early(at)
		}
	}
	for _, p := range s.Processes() {
		for _, sr := range []*session.Series{p.Allocated, p.MaxAllocated, p.Reserved, p.GPU} {
			first(sr)
		}
		if sp := p.Spans(); len(sp) > 0 {
			early(sp[0].Start)
		}
		if st := p.Steps(); len(st) > 0 {
			early(st[0].Start)
		}
		for _, m := range p.Marks {
			early(m.At)
		}
	}
	for _, g := range s.GPUs() {
		first(g.Used)
	}
	return t0
}

// add appends e with its name and text arguments escaped by textesc: they
// are what Perfetto's UI shows, and a hook's text may carry controls.
func (b *builder) add(e Event) {
	e.Name = textesc.String(e.Name)
	for k, v := range e.Args {
		if s, ok := v.(string); ok {
			e.Args[k] = textesc.String(s)
		}
	}
	b.tr.TraceEvents = append(b.tr.TraceEvents, e)
}

// us is a time as microseconds from the trace's start, to the nanosecond.
func (b *builder) us(t time.Time) float64 {
	return float64(t.Sub(b.t0).Nanoseconds()) / 1e3
}

func dur(from, to time.Time) *float64 {
	d := 0.0
	if to.After(from) {
		d = float64(to.Sub(from).Nanoseconds()) / 1e3
	}
	return &d
}

func (b *builder) meta(name string, pid, tid int, args map[string]any) {
	// Chrome writes its own metadata events with this category; some
	// readers require every event to have one.
	b.add(Event{Name: name, Cat: "__metadata", Ph: "M", Pid: pid, Tid: tid, Args: args})
}

// processName is what the viewers list a training process as.
func processName(p *session.Process) string {
	name := p.Label()
	if h := p.Hello.Host; h != "" {
		name += " · " + h
	}
	if c := p.Hello.CUDA; c != nil {
		name += fmt.Sprintf(" · cuda:%d", c.Index)
	}
	return name
}

func (b *builder) process(p *session.Process, pid int, name string, order int) {
	sort := order
	if p.Hello.Rank != nil {
		sort = *p.Hello.Rank
	}
	b.meta("process_name", pid, 0, map[string]any{"name": name})
	b.meta("process_sort_index", pid, 0, map[string]any{"sort_index": sort})
	if p.Hello.Rank != nil {
		b.meta("process_labels", pid, 0, map[string]any{"labels": fmt.Sprintf("rank %d", *p.Hello.Rank)})
	}
	b.meta("thread_name", pid, tidSteps, map[string]any{"name": "steps and phases"})
	b.meta("thread_sort_index", pid, tidSteps, map[string]any{"sort_index": 0})
	b.steps(p, pid)
	b.spans(p, pid)
	for _, m := range p.Marks {
		args := map[string]any{"step": m.Step}
		if m.Mem != nil {
			args["allocated"], args["reserved"] = m.Mem.Allocated, m.Mem.Reserved
		}
		b.add(Event{Name: m.Name, Cat: "mark", Ph: "i", S: "p", Ts: b.us(m.At), Pid: pid, Tid: tidMarks, Args: args})
	}
	b.counter(p.Allocated, "allocated", pid)
	b.counter(p.MaxAllocated, "max allocated", pid)
	b.counter(p.Reserved, "reserved", pid)
	switch p.GPUSource {
	case "process":
		b.counter(p.GPU, "nvml process used", pid)
	case "device":
		b.counter(p.GPU, "nvml device used", pid)
	}
}

// steps writes one slice per step of the table, from its first phase's
// begin to its last phase's end: the phases nest inside it.
func (b *builder) steps(p *session.Process, pid int) {
	for _, st := range p.Steps() {
		if st.Start.IsZero() {
			continue
		}
		args := map[string]any{"step": st.Index, "micro": st.Micro}
		putBytes(args, "peak_allocated", st.PeakAllocated)
		putBytes(args, "peak_reserved", st.PeakReserved)
		putBytes(args, "peak_nvml", st.PeakGPU)
		name := fmt.Sprintf("step %d", st.Index)
		if st.Model != "" {
			args["model"] = st.Model // the watch that stepped (a GAN's D or G)
			name += " " + st.Model
		}
		b.add(Event{Name: name, Cat: "step", Ph: "X",
			Ts: b.us(st.Start), Dur: dur(st.Start, st.End), Pid: pid, Tid: tidSteps, Args: args})
	}
}

// spans writes the finished phases. Automatic phases nest in their step's
// slice; user phases go on their own track, since they may wrap or cross
// the automatic ones.
func (b *builder) spans(p *session.Process, pid int) {
	user := false
	for i := range p.Spans() {
		sp := &p.Spans()[i]
		end := sp.End
		if sp.Open() {
			// Still running when the recording ended (a crash, an OOM): drawn
			// to the process's last event, marked unfinished.
			end = p.Last
			if !end.After(sp.Start) {
				continue
			}
		}
		tid := tidSteps
		if sp.User {
			tid, user = tidUser, true
		}
		// backwards_before: the backward passes already finished in the step
		// when the phase began (the hook's micro: the micro-step's index
		// for its forward, the step's count for the optimizer step). It was
		// named "micro" like the step's count here and the CSV's.
		args := map[string]any{"step": sp.Step, "backwards_before": sp.Micro, "peak_exact": sp.Exact}
		if sp.Model != "" {
			args["model"] = sp.Model
		}
		putBytes(args, "peak_allocated", sp.PeakAllocated)
		putBytes(args, "peak_reserved", sp.PeakReserved)
		putBytes(args, "peak_nvml", sp.PeakGPU)
		if sp.Begin.Taken {
			args["allocated_begin"] = sp.Begin.Allocated
		}
		if sp.Last.Taken {
			args["allocated_end"] = sp.Last.Allocated
		}
		if sp.Open() {
			args["unfinished"] = true
		}
		b.add(Event{Name: sp.Name, Cat: "phase", Ph: "X", Ts: b.us(sp.Start), Dur: dur(sp.Start, end),
			Pid: pid, Tid: tid, Args: args})
	}
	if user {
		b.meta("thread_name", pid, tidUser, map[string]any{"name": "user phases"})
		b.meta("thread_sort_index", pid, tidUser, map[string]any{"sort_index": 1})
	}
}

// counter writes a series as a counter track. Each counter has its own
// name and a single "bytes" value, so the viewers draw separate tracks
// rather than stacking them.
func (b *builder) counter(s *session.Series, name string, pid int) {
	emit := func(at time.Time, v int64) {
		b.add(Event{Name: name, Cat: "memory", Ph: "C", Ts: b.us(at), Pid: pid, Args: map[string]any{"bytes": v}})
	}
	var prev int64 = -1
	var lastAt time.Time
	held := false // the newest point repeats the value before it
	s.Points(func(at time.Time, v int64) {
		lastAt = at
		if v == prev {
			held = true // a counter holds its value until the next event
			return
		}
		prev, held = v, false
		emit(at, v)
	})
	if held {
		emit(lastAt, prev) // so the track reaches the series' end
	}
}

func (b *builder) gpu(g *session.GPU, pid, order int) {
	name := "NVML device " + g.UUID
	b.meta("process_name", pid, 0, map[string]any{"name": name})
	b.meta("process_sort_index", pid, 0, map[string]any{"sort_index": 1000 + order})
	b.counter(g.Used, "nvml device used", pid)
}

func putBytes(args map[string]any, key string, v session.Bytes) {
	if v.Known() {
		args[key] = int64(v)
	}
}

// sortEvents orders events by time, metadata first; the format does not
// require it, but readers that stream a trace prefer it.
func sortEvents(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		mi, mj := evs[i].Ph == "M", evs[j].Ph == "M"
		if mi != mj {
			return mi
		}
		return evs[i].Ts < evs[j].Ts
	})
}
