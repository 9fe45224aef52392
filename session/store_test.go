package session

import (
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
)

// feed builds hook events for one connection on a virtual clock that starts
// at mono 100 s = wall 1,700,000,000 s.
type feed struct {
	conn uint64
	seq  uint64
	t    float64
	evs  []Event
	top  int64 // the peak counter so far, in MiB (exact_test.go)
}

const wall0 = 1_700_000_000

func mib(v int64) int64 { return v * MiB }

func mem(alloc, maxAlloc, reserved int64) *ipc.Mem {
	return &ipc.Mem{Allocated: mib(alloc), MaxAllocated: mib(maxAlloc), Reserved: mib(reserved), MaxReserved: mib(reserved)}
}

func newFeed(conn uint64, session string, opts ...func(*ipc.Message)) *feed {
	f := &feed{conn: conn, t: 100}
	h := &ipc.Message{V: 1, Type: ipc.TypeHello, T: 100, Session: session, PID: 4242,
		Clock: &ipc.Clock{Mono: 100, Wall: wall0}, Hook: &ipc.HookConfig{SampleHz: 50}}
	for _, o := range opts {
		o(h)
	}
	f.add(h)
	return f
}

func (f *feed) add(m *ipc.Message) {
	m.V = 1
	if m.Type != ipc.TypeHello {
		f.seq++
		m.Seq = f.seq
	}
	m.T = f.t
	f.evs = append(f.evs, Event{At: time.Unix(wall0+int64(f.t), 0), Conn: f.conn, Msg: m})
}

func (f *feed) phase(name string, step, micro int, dt float64, begin, end *ipc.Mem) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Micro: micro, Edge: ipc.EdgeBegin, Mem: begin})
	f.t += dt
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Micro: micro, Edge: ipc.EdgeEnd, Mem: end})
}

func (f *feed) sample(m *ipc.Mem) { f.add(&ipc.Message{Type: ipc.TypeSample, Mem: m}) }

func TestStepTableFromPhases(t *testing.T) {
	f := newFeed(1, "s1")
	f.phase("zero_grad", 0, 0, 0.01, mem(281, 281, 284), mem(281, 281, 284))
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 0, Edge: ipc.EdgeBegin, Mem: mem(281, 281, 284)})
	f.t += 0.05
	f.sample(mem(2154, 2154, 2178)) // transient inside forward
	f.t += 0.05
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: 0, Edge: ipc.EdgeEnd, Mem: mem(2108, 2154, 2178)})
	f.phase("loss", 0, 0, 0.01, mem(2108, 2154, 2178), mem(2566, 2566, 2635))
	f.phase("backward", 0, 0, 0.2, mem(2566, 2566, 2635), mem(1020, 3482, 3551))
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 0, Edge: ipc.EdgeBegin, Mem: mem(1020, 3482, 3551)})
	f.t += 0.02
	f.sample(mem(1900, 3482, 3551)) // optimizer temporaries, below the old peak
	f.t += 0.02
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "step", Step: 0, Edge: ipc.EdgeEnd, Mem: mem(1581, 3482, 3551)})

	s := New()
	s.ApplyAll(f.evs)
	ps := s.Processes()
	if len(ps) != 1 {
		t.Fatalf("%d processes", len(ps))
	}
	steps := ps[0].Steps()
	if len(steps) != 1 {
		t.Fatalf("%d steps", len(steps))
	}
	st := steps[0]
	var names []string
	for _, c := range st.Phases {
		names = append(names, c.Name)
	}
	if got, want := len(names), 5; got != want || names[0] != "zero_grad" || names[4] != "step" {
		t.Fatalf("phases %v", names)
	}
	cases := []struct {
		phase                    string
		allocEnd, maxEnd, resEnd int64
		peak                     int64
		exact                    bool
	}{
		{"zero_grad", 281, 281, 284, 281, false},
		{"forward", 2108, 2154, 2178, 2154, true},
		{"loss", 2566, 2566, 2635, 2566, true},
		{"backward", 1020, 3482, 3551, 3482, true},
		{"step", 1581, 3482, 3551, 1900, false}, // lower bound: the counter did not move
	}
	for _, c := range cases {
		cell := st.Cell(c.phase)
		if cell == nil {
			t.Fatalf("no cell %s", c.phase)
		}
		if cell.AllocatedEnd != Bytes(mib(c.allocEnd)) || cell.MaxAllocatedEnd != Bytes(mib(c.maxEnd)) || cell.ReservedEnd != Bytes(mib(c.resEnd)) {
			t.Errorf("%s end = %s/%s/%s MiB", c.phase, cell.AllocatedEnd.MiBString(), cell.MaxAllocatedEnd.MiBString(), cell.ReservedEnd.MiBString())
		}
		if cell.PeakAllocated != Bytes(mib(c.peak)) || cell.Exact != c.exact {
			t.Errorf("%s peak = %s MiB exact=%v, want %d exact=%v", c.phase, cell.PeakAllocated.MiBString(), cell.Exact, c.peak, c.exact)
		}
	}
	if st.PeakAllocated != Bytes(mib(3482)) {
		t.Errorf("step peak %s", st.PeakAllocated.MiBString())
	}
	if d := st.Duration(); d < 355*time.Millisecond || d > 365*time.Millisecond {
		t.Errorf("step duration %v", d)
	}
	// Hook time, not receive time: the first phase begins at mono 100 = wall0.
	if !st.Start.Equal(time.Unix(wall0, 0)) {
		t.Errorf("step start %v", st.Start)
	}
}

func TestResetPeaksMakesEveryPeakExact(t *testing.T) {
	f := newFeed(1, "s1", func(h *ipc.Message) { h.Hook.ResetPeaks = true })
	// With resets, max_allocated at the end is this phase's own peak even
	// though it is below the session's.
	f.phase("step", 3, 0, 0.1, mem(1000, 1000, 4000), mem(1500, 2100, 4000))
	s := New()
	s.ApplyAll(f.evs)
	c := s.Processes()[0].Steps()[0].Cell("step")
	if c.PeakAllocated != Bytes(mib(2100)) || !c.Exact {
		t.Fatalf("peak %s exact=%v", c.PeakAllocated.MiBString(), c.Exact)
	}
}

func TestMicroStepsMergeIntoOneCell(t *testing.T) {
	f := newFeed(1, "s1")
	for micro := 0; micro < 2; micro++ {
		f.phase("forward", 0, micro, 0.1, mem(100, 100, 200), mem(300+int64(micro)*50, 300+int64(micro)*50, 400))
		f.phase("backward", 0, micro, 0.1, mem(300, 350, 400), mem(120, 500+int64(micro), 600))
	}
	f.phase("step", 0, 2, 0.05, mem(120, 501, 600), mem(130, 501, 600))
	s := New()
	s.ApplyAll(f.evs)
	st := s.Processes()[0].Steps()[0]
	if len(st.Phases) != 3 {
		t.Fatalf("%d cells", len(st.Phases))
	}
	if c := st.Cell("forward"); c.Count != 2 || c.AllocatedEnd != Bytes(mib(350)) || c.PeakAllocated != Bytes(mib(350)) {
		t.Errorf("forward cell %+v", c)
	}
	if c := st.Cell("backward"); c.Count != 2 || c.PeakAllocated != Bytes(mib(501)) {
		t.Errorf("backward cell %+v", c)
	}
	if st.Micro != 2 {
		t.Errorf("micro %d", st.Micro)
	}
}

// An update split between two optimizers, each zeroed after its own step
// (for opt in opts: opt.step(); opt.zero_grad()): the step cell's Rise is
// what both steps allocated, each from where it began, not the net change
// across the zero_grad between them; a first step span after anything but
// a backward has no known start.
func TestStepRiseSumsEachStepSpanFromWhereItBegan(t *testing.T) {
	f := newFeed(1, "s1")
	f.phase("forward", 0, 0, 0.1, mem(100, 100, 900), mem(400, 400, 900))
	f.phase("backward", 0, 0, 0.1, mem(400, 400, 900), mem(200, 450, 900))
	f.phase("step", 0, 1, 0.05, mem(200, 450, 900), mem(300, 320, 900))      // Muon's state: +100
	f.phase("zero_grad", 0, 1, 0.01, mem(300, 320, 900), mem(220, 300, 900)) // its gradients freed
	f.phase("step", 0, 1, 0.05, mem(220, 300, 900), mem(280, 290, 900))      // AdamW's state: +60
	f.phase("zero_grad", 1, 0, 0.01, mem(280, 290, 900), mem(260, 280, 900))
	f.phase("step", 1, 0, 0.05, mem(260, 280, 900), mem(270, 280, 900))
	s := New()
	s.ApplyAll(f.evs)
	steps := s.Processes()[0].Steps()
	if c := steps[0].Cell("step"); c.Count != 2 || c.Rise != Bytes(mib(160)) {
		t.Errorf("step 0's step cell: count %d, rise %s, want 2 and 160 MiB", c.Count, c.Rise.MiBString())
	}
	if c := steps[1].Cell("step"); c.Rise.Known() {
		t.Errorf("a step after a zero_grad alone: rise %s, want unknown", c.Rise.MiBString())
	}
	if c := steps[0].Cell("backward"); c.Rise.Known() {
		t.Errorf("a backward cell's rise %s", c.Rise.MiBString())
	}
}

func TestSeqDuplicatesAndLoss(t *testing.T) {
	f := newFeed(1, "s1")
	for i := 0; i < 5; i++ {
		f.sample(mem(int64(i), int64(i), 10))
	}
	evs := f.evs
	// Replay after a reconnect: hello again on conn 2, then seq 1..5 again,
	// then 8 (6 and 7 lost).
	re := []Event{{Conn: 2, Msg: evs[0].Msg}}
	for _, ev := range evs[1:] {
		re = append(re, Event{Conn: 2, Msg: ev.Msg})
	}
	late := &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: 8, T: 101, Mem: mem(9, 9, 10)}
	re = append(re, Event{Conn: 2, Msg: late})
	s := New()
	s.ApplyAll(evs)
	s.ApplyAll(re)
	p := s.Processes()[0]
	if len(s.Processes()) != 1 {
		t.Fatalf("reconnect made %d processes", len(s.Processes()))
	}
	if p.Duplicates != 5 || p.Lost != 2 || s.Lost() != 2 {
		t.Fatalf("duplicates %d lost %d", p.Duplicates, p.Lost)
	}
	if p.Allocated.Len() != 6 {
		t.Fatalf("%d points, want 6", p.Allocated.Len())
	}
}

func TestMessageBeforeHelloIsCountedNotApplied(t *testing.T) {
	s := New()
	s.Apply(Event{Conn: 9, Msg: &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: 1, Mem: mem(1, 1, 1)}})
	if s.Errors != 1 || len(s.Processes()) != 0 || s.LastError == "" {
		t.Fatalf("errors %d procs %d %q", s.Errors, len(s.Processes()), s.LastError)
	}
}

func TestDisconnectAndGoodbye(t *testing.T) {
	a, b := newFeed(1, "a"), newFeed(2, "b")
	b.add(&ipc.Message{Type: ipc.TypeGoodbye, Reason: "exit", Stats: &ipc.Stats{Created: 2, Dropped: 1}})
	s := New()
	s.ApplyAll(a.evs)
	s.ApplyAll(b.evs)
	s.Apply(Event{Conn: 1, Note: &Note{Kind: NoteDisconnect, Text: "closed"}})
	for _, p := range s.Processes() {
		if p.Connected {
			t.Errorf("%s still connected", p.Key)
		}
	}
	if s.Process("b").Stats.Dropped != 1 {
		t.Errorf("goodbye stats not kept")
	}
}

func TestUserPhaseNestsAndDoesNotSetStepPeak(t *testing.T) {
	f := newFeed(1, "s1")
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "eval", Step: 0, Edge: ipc.EdgeBegin, User: true, Mem: mem(100, 100, 200)})
	// A training forward (a loss follows it) inside a user phase.
	f.phase("forward", 0, 0, 0.1, mem(100, 100, 200), mem(900, 900, 1000))
	f.phase("loss", 0, 0, 0.1, mem(900, 900, 1000), mem(100, 900, 1000))
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "eval", Step: 0, Edge: ipc.EdgeEnd, User: true, Mem: mem(100, 900, 1000)})
	f.phase("step", 0, 0, 0.1, mem(100, 900, 1000), mem(150, 900, 1000))
	s := New()
	s.ApplyAll(f.evs)
	st := s.Processes()[0].Steps()[0]
	if c := st.Cell("eval"); c == nil || !c.User || c.PeakAllocated != Bytes(mib(900)) {
		t.Fatalf("eval cell %+v", c)
	}
	if st.PeakAllocated != Bytes(mib(900)) {
		t.Fatalf("step peak %s (forward's 900 expected)", st.PeakAllocated.MiBString())
	}
}

func TestNewPhaseClosesAnOpenAutomaticPhase(t *testing.T) {
	f := newFeed(1, "s1")
	// An eval forward under no_grad: forward begins and ends, then no
	// backward; a forward that never ended is closed by the next begin.
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Edge: ipc.EdgeBegin, Mem: mem(1, 1, 1)})
	f.t += 0.1
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "zero_grad", Step: 1, Edge: ipc.EdgeBegin, Mem: mem(2, 2, 2)})
	s := New()
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	sp := p.Spans()
	if len(sp) != 2 || sp[0].Open() || !sp[1].Open() {
		t.Fatalf("spans %+v", sp)
	}
}

func TestGPUOverlayMatchesByUUIDAndPID(t *testing.T) {
	uuid := "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f"
	f := newFeed(1, "s1", func(h *ipc.Message) {
		h.CUDA = &ipc.CUDADevice{Index: 0, UUID: uuid, Name: "A100", Total: mib(81920)}
	})
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: "forward", Edge: ipc.EdgeBegin, Mem: mem(100, 100, 200)})
	s := New()
	s.ApplyAll(f.evs)
	at := time.Unix(wall0, 0)
	other := probe.Sample{At: at, Device: "GPU-other", Used: mib(10), Total: mib(100), Processes: []probe.Process{}}
	s.Apply(Event{At: at, GPU: &other})
	mine := probe.Sample{At: at, Device: "gpu-5E7F3A1C-0B2D-4C8E-9F10-2A3B4C5D6E7F", Used: mib(5000), Total: mib(81920),
		Processes: []probe.Process{{PID: 4242, Used: mib(700)}, {PID: 99, Used: mib(4000)}}}
	s.Apply(Event{At: at, GPU: &mine})
	p := s.Processes()[0]
	if g := s.GPUFor(p); g == nil || g.Total != Bytes(mib(81920)) {
		t.Fatalf("GPUFor = %+v", g)
	}
	if _, v, ok := p.GPU.Last(); !ok || v != mib(700) || p.GPUSource != "process" {
		t.Fatalf("process figure %d %v source %q", v, ok, p.GPUSource)
	}
	// A round without the process list keeps using the last list read.
	next := mine
	next.Processes = nil
	next.At = at.Add(time.Second)
	s.Apply(Event{At: next.At, GPU: &next})
	if _, v, _ := p.GPU.Last(); v != mib(700) {
		t.Fatalf("figure after a device-only round: %d", v)
	}
	if len(s.GPUs()) != 2 {
		t.Fatalf("%d gpus", len(s.GPUs()))
	}
	if p.Spans()[0].PeakGPU != Bytes(mib(700)) {
		t.Fatalf("span GPU peak %s", p.Spans()[0].PeakGPU.MiBString())
	}
}

func TestBoundedStepsKeepFirstAndRecent(t *testing.T) {
	f := newFeed(1, "s1")
	for step := 0; step < 500; step++ {
		f.phase("backward", step, 0, 0.01, mem(1, 1, 1), mem(int64(step), int64(step), 1000))
	}
	s := New(WithMaxSteps(100), WithMaxStepPeaks(300))
	s.ApplyAll(f.evs)
	p := s.Processes()[0]
	steps := p.Steps()
	if len(steps) < 100 || len(steps) > 110 {
		t.Fatalf("%d steps kept, want 100 to 110", len(steps))
	}
	if steps[0].Index != 0 || steps[9].Index != 9 || steps[len(steps)-1].Index != 499 {
		t.Fatalf("kept steps %d..%d, %d", steps[0].Index, steps[9].Index, steps[len(steps)-1].Index)
	}
	for _, st := range steps { // rows dropped from the middle are reused: none keeps a figure of its last step
		if len(st.Phases) != 1 || st.Phases[0].Count != 1 || st.Phases[0].AllocatedEnd != Bytes(mib(int64(st.Index))) || st.Held != Bytes(mib(int64(st.Index))) {
			t.Fatalf("step %d: %d cells, %+v, held %s", st.Index, len(st.Phases), st.Phases, st.Held.MiBString())
		}
	}
	pk := p.StepPeaks()
	if len(pk) < 300 || len(pk) > 330 {
		t.Fatalf("%d step peaks kept, want about 300", len(pk))
	}
	if pk[0].Index != 0 || pk[29].Index != 29 || pk[len(pk)-1].Index != 499 || pk[len(pk)-1].PeakAllocated != Bytes(mib(499)) {
		t.Fatalf("kept summaries %d, %d … %d", pk[0].Index, pk[29].Index, pk[len(pk)-1].Index)
	}
	for i := 1; i < len(pk); i++ {
		if pk[i].Index <= pk[i-1].Index {
			t.Fatalf("summaries out of order at %d", i)
		}
	}
}

func TestGPUSamplesAreAttributedByTimeNotArrival(t *testing.T) {
	uuid := "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f"
	f := newFeed(1, "s1", func(h *ipc.Message) {
		h.CUDA = &ipc.CUDADevice{UUID: uuid, Name: "A100", Total: mib(81920)}
	})
	f.phase("forward", 0, 0, 0.1, mem(100, 100, 200), mem(300, 300, 400))  // 100.0–100.1
	f.phase("backward", 0, 0, 0.1, mem(300, 300, 400), mem(120, 500, 600)) // 100.1–100.2
	at := func(s float64) time.Time { return time.Unix(wall0, 0).Add(time.Duration(s * float64(time.Second))) }
	smp := func(s float64, used int64) Event {
		return Event{At: at(s), GPU: &probe.Sample{At: at(s), Device: uuid, Used: mib(used + 1000), Total: mib(81920),
			Processes: []probe.Process{{PID: 4242, Used: mib(used)}}}}
	}
	s := New()
	// NVML saw the process before its hello arrived (the demo at full
	// speed, or a hook that connects late).
	s.Apply(smp(0.05, 700))
	s.ApplyAll(f.evs)
	// And a sample inside backward arrives after backward has ended.
	s.Apply(smp(0.15, 900))
	p := s.Processes()[0]
	st := p.Steps()[0]
	if c := st.Cell("forward"); c.PeakGPU != Bytes(mib(700)) {
		t.Errorf("forward NVML peak %s, want 700 (the sample in effect)", c.PeakGPU.MiBString())
	}
	if c := st.Cell("backward"); c.PeakGPU != Bytes(mib(900)) {
		t.Errorf("backward NVML peak %s, want 900 (the late sample)", c.PeakGPU.MiBString())
	}
	if st.PeakGPU != Bytes(mib(900)) || p.StepPeaks()[0].PeakGPU != Bytes(mib(900)) {
		t.Errorf("step NVML peak %s / %s", st.PeakGPU.MiBString(), p.StepPeaks()[0].PeakGPU.MiBString())
	}
}

func TestProcessFigureStaysListedWhenOthersShareTheDevice(t *testing.T) {
	uuid := "GPU-a"
	f := newFeed(1, "s1", func(h *ipc.Message) { h.CUDA = &ipc.CUDADevice{UUID: uuid} })
	s := New()
	s.ApplyAll(f.evs)
	at := time.Unix(wall0, 0)
	s.Apply(Event{GPU: &probe.Sample{At: at, Device: uuid, Used: mib(1500), Processes: []probe.Process{{PID: 4242, Used: mib(1000)}, {PID: 7, Used: mib(500)}}}})
	s.Apply(Event{GPU: &probe.Sample{At: at.Add(100 * time.Millisecond), Device: uuid, Used: mib(2300)}})
	if _, v, _ := s.Processes()[0].GPU.Last(); v != mib(1000) {
		t.Fatalf("process figure %d MiB, want the listed 1000: the device's change may be the other process's", v/MiB)
	}
	if n := s.Processes()[0].GPU.Len(); n != 1 {
		t.Fatalf("%d process points from one list read", n)
	}
}

func TestResumeNoteIsNotLoss(t *testing.T) {
	s := New()
	f := newFeed(1, "s1")
	s.ApplyAll(f.evs)
	s.Apply(Event{Conn: 1, Note: &Note{Kind: NoteResume, Seq: 500}})
	s.Apply(Event{Conn: 1, Msg: &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: 501, T: 100, Mem: mem(1, 1, 1)}})
	if p := s.Processes()[0]; p.Lost != 0 || p.Allocated.Len() != 1 {
		t.Fatalf("lost %d, points %d", p.Lost, p.Allocated.Len())
	}
}
