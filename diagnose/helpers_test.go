package diagnose

import (
	"math"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// The simulated driver of the NVML cases: the process's CUDA context and
// another process on the same device.
const (
	testContext    = 416 * session.MiB
	testOtherPID   = 99
	testOtherBytes = 1000 * session.MiB
)

// demoMessages generates steps steps of a demo scenario.
func demoMessages(t testing.TB, scenario string, steps int) []ipc.Message {
	t.Helper()
	sc, err := demo.Lookup(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return demo.Generate(sc, demo.Config{Steps: steps})
}

// demoEveryPhase is demoMessages from a hook that reads every phase of
// every step (as on CPU): for checks of a phase's figures in any step.
func demoEveryPhase(t testing.TB, scenario string, steps int) []ipc.Message {
	t.Helper()
	sc, err := demo.Lookup(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return demo.Generate(sc, demo.Config{Steps: steps, EveryPhase: true})
}

// wallOf maps a hook time to wall time through the hello's clock.
func wallOf(hello *ipc.Message, t float64) time.Time {
	s := hello.Clock.Wall + (t - hello.Clock.Mono)
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
}

// events turns a message sequence (hello first) into store events on
// connection 1. With nvml, each allocator snapshot is followed by an NVML
// sample of the device: the process holds reserved + testContext, another
// process testOtherBytes.
func events(msgs []ipc.Message, nvml bool) []session.Event {
	hello := &msgs[0]
	evs := make([]session.Event, 0, 2*len(msgs))
	for i := range msgs {
		m := &msgs[i]
		at := wallOf(hello, m.T)
		evs = append(evs, session.Event{At: at, Conn: 1, Msg: m})
		if nvml && m.Mem != nil {
			used := m.Mem.Reserved + testContext
			evs = append(evs, session.Event{At: at, GPU: &probe.Sample{
				At: at, Device: demo.DeviceUUID, Total: demo.DeviceTotal, Util: -1,
				Used: used + testOtherBytes, Reserved: -1, Free: demo.DeviceTotal - used - testOtherBytes,
				Processes: []probe.Process{{PID: hello.PID, Used: used}, {PID: testOtherPID, Used: testOtherBytes}},
			}})
		}
	}
	return evs
}

// cpuRun strips a run down to what a CPU run sends: no device, no
// allocator snapshots, no samples.
func cpuRun(msgs []ipc.Message) []ipc.Message {
	var out []ipc.Message
	for _, m := range msgs {
		switch m.Type {
		case ipc.TypeSample:
			continue
		case ipc.TypeHello:
			m.CUDA = nil
		case ipc.TypeAnatomy:
			m.Device = "cpu"
		}
		m.Mem = nil
		out = append(out, m)
	}
	return renumber(out)
}

// renumber gives the messages after the hello consecutive seq numbers, for
// streams a test edited.
func renumber(msgs []ipc.Message) []ipc.Message {
	for i := range msgs {
		msgs[i].Seq = uint64(i)
	}
	return msgs
}

// storeOf feeds messages into a new store and returns its only process.
func storeOf(t testing.TB, msgs []ipc.Message, nvml bool) (*session.Store, *session.Process) {
	t.Helper()
	s := session.New()
	s.ApplyAll(events(msgs, nvml))
	if len(s.Processes()) != 1 {
		t.Fatalf("%d processes", len(s.Processes()))
	}
	return s, s.Processes()[0]
}

func mibs(v int64) session.Bytes { return session.Bytes(v * session.MiB) }

// h100Run collects a generated run's messages, numbered and 10 ms apart,
// after the hello of a 0.2.0 hook on an H100 (exact: with exact peaks).
type h100Run struct {
	msgs []ipc.Message
	t    float64
}

func newH100Run(session string, pid int, exact bool) *h100Run {
	r := &h100Run{t: 100}
	r.add(ipc.Message{Type: ipc.TypeHello, Session: session, PID: pid, Torch: "2.11.0+cu130",
		Clock: &ipc.Clock{Mono: 100, Wall: 1_763_794_800},
		CUDA:  &ipc.CUDADevice{Index: 0, Name: "NVIDIA H100 80GB HBM3", Total: 85520809984},
		Hook:  &ipc.HookConfig{Version: "0.2.0", SampleHz: 50, ExactPeaks: exact}})
	return r
}

func (r *h100Run) add(m ipc.Message) {
	m.V, m.T, m.Seq = 1, r.t, uint64(len(r.msgs))
	r.t += 0.01
	r.msgs = append(r.msgs, m)
}

// namedRun is a run whose every phase the hook read (exact peaks): step i is
// the update of model(i), holding held(i) MiB after it and peaking peak(i)
// MiB above that in its backward.
func namedRun(steps int, model func(int) string, held, peak func(int) int64) []ipc.Message {
	run := newH100Run("gan", 9, true)
	mem := func(alloc, top int64) *ipc.Mem {
		return &ipc.Mem{Allocated: alloc * session.MiB, MaxAllocated: top * session.MiB, Reserved: 90000 * session.MiB, MaxReserved: 90000 * session.MiB}
	}
	for i := range steps {
		h, pk, name := held(i), peak(i), model(i)
		for _, e := range []struct {
			name      string
			end, peak int64
		}{{"zero_grad", h, h}, {"forward", h + pk/2, h + pk/2}, {"loss", h + pk/2, h + pk/2}, {"backward", h, h + pk}, {"step", h, h}} {
			run.add(ipc.Message{Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeBegin, Model: name})
			run.add(ipc.Message{Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeEnd, Model: name, Mem: mem(e.end, e.peak)})
		}
	}
	run.add(ipc.Message{Type: ipc.TypeGoodbye, Reason: "exit"})
	return run.msgs
}
