package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// synth writes a recording in the documented format (docs/format.md: a
// header line, then {"t","conn","msg"} hook lines, {"t","gpu"} NVML lines
// and {"t","conn","note"} notes) of a training loop as the hook reports it:
// zero_grad, forward, loss, backward, step per step, with reset_peaks on so
// every phase end carries that phase's exact peak.
//
// The memory model is the one real runs show (testdata/h100/s001 and oom):
// weights, then gradients created by the first backward and kept, optimizer
// state created by the first optimizer step (2× the weights for Adam), the
// activations saved by forward and freed by backward, and the backward
// peak = held + activations + gradients.
type synth struct {
	buf     bytes.Buffer
	seq     int
	mono    float64 // the hook's clock, seconds
	weights int64
	grads   bool
	optim   bool
	held    int64 // extra bytes kept across steps (a leak)
	step    int
	inputs  bool // send the protocol's input field on forward begins
	total   int64
	cur     int64
	spike   int64  // temporaries of optimizer.step() above its start
	model   string // the watch's name each phase edge carries ("": none)
}

const (
	synthWall  = 1763794800.0
	synthMono  = 1000.0
	synthTotal = 85899345920 // 80 GiB
	sMiB       = 1 << 20
)

func newSynth(weights int64, inputs bool) *synth {
	s := &synth{weights: weights, mono: synthMono, inputs: inputs, total: synthTotal}
	s.buf.WriteString(`{"vramscope_recording":1,"version":"1.0","created":"2025-11-22T08:00:00Z","tool":"test","host":"h","argv":["vramscope","record"],"source":"live"}` + "\n")
	s.msg(map[string]any{"type": "hello", "session": "synth", "pid": 4242, "host": "h", "argv": []string{"train.py"},
		"torch": "2.3.1", "cuda": map[string]any{"index": 0, "uuid": "GPU-1", "name": "H100", "total": synthTotal},
		"clock": map[string]any{"mono": synthMono, "wall": synthWall},
		"hook":  map[string]any{"version": "0.2.0", "sample_hz": 50.0, "reset_peaks": true, "activations_every": 100}})
	s.seq = 0
	return s
}

func (s *synth) line(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.buf.Write(b)
	s.buf.WriteByte('\n')
}

// msg appends a hook message at the hook's current time.
func (s *synth) msg(m map[string]any) {
	m["v"], m["seq"], m["t"] = 1, s.seq, s.mono
	s.seq++
	s.line(map[string]any{"t": synthWall + (s.mono - synthMono), "conn": 1, "msg": m})
}

func (s *synth) mem(alloc, peak int64) map[string]any {
	res := max(peak, alloc) + 64*sMiB
	return map[string]any{"allocated": alloc, "max_allocated": peak, "reserved": res, "max_reserved": res}
}

// phase sends a phase's begin and end edges with the allocated at each
// and the phase's peak; input is the batch for a training forward.
func (s *synth) phase(name string, begin, end, peak int64, input int64, user bool) {
	b := map[string]any{"type": "phase", "name": name, "step": s.step, "edge": "begin", "user": user, "mem": s.mem(begin, begin)}
	if name == "forward" && s.inputs && input > 0 {
		b["input"] = map[string]any{"batch": input, "tokens": nil}
	}
	e := map[string]any{"type": "phase", "name": name, "step": s.step, "edge": "end", "user": user, "mem": s.mem(end, peak)}
	if s.model != "" {
		b["model"], e["model"] = s.model, s.model
	}
	s.msg(b)
	s.mono += 0.01
	s.msg(e)
	s.cur = end
}

// train sends one training step whose forward saves acts bytes.
func (s *synth) train(acts, batch int64) {
	w, held := s.weights, s.weights+s.held
	g := int64(0)
	if s.grads {
		g = w
	}
	o := int64(0)
	if s.optim {
		o = 2 * w
	}
	base := held + o
	s.phase("zero_grad", base+g, base, base+g, 0, false)
	s.phase("forward", base, base+acts, base+acts, batch, false)
	s.phase("loss", base+acts, base+acts, base+acts, 0, false)
	s.phase("backward", base+acts, base+w, base+acts+w, 0, false)
	s.grads = true
	if !s.optim {
		s.optim, o = true, 2*w
	}
	s.phase("step", base+w, held+o+w, held+o+w+s.spike, 0, false)
	if s.step == 0 {
		s.anatomy(acts, batch)
	}
	s.step++
	s.mono += 0.05
}

// eval sends a forward under no_grad (no loss follows it) that peaks acts
// above the memory held.
func (s *synth) eval(acts int64) {
	s.phase("forward", s.cur, s.cur, s.cur+acts, 0, false)
}

// between sends what the hook reads between two steps when memory rose
// there with none of its phases open: the user phase BetweenPhase of the
// step before, its begin edge with no read, its end's peak acts above the
// memory held.
func (s *synth) between(acts int64) {
	step := s.step - 1
	s.msg(map[string]any{"type": "phase", "name": session.BetweenPhase, "step": step, "edge": "begin", "user": true, "mem": nil})
	s.msg(map[string]any{"type": "phase", "name": session.BetweenPhase, "step": step, "edge": "end", "user": true, "mem": s.mem(s.cur, s.cur+acts)})
}

// evalUser sends the hook's own evaluation between steps (docs/hook.md, "An
// evaluation between steps"): the user phase eval of the step before, read
// at both edges, its peak acts above the memory held; grad its end edge's
// field (a forward of it ran with gradients enabled).
func (s *synth) evalUser(acts int64, grad bool) {
	step := s.step - 1
	s.msg(map[string]any{"type": "phase", "name": session.EvalPhase, "step": step, "edge": "begin", "user": true, "mem": s.mem(s.cur, s.cur)})
	end := map[string]any{"type": "phase", "name": session.EvalPhase, "step": step, "edge": "end", "user": true, "mem": s.mem(s.cur, s.cur+acts)}
	if grad {
		end["grad"] = true
	}
	s.msg(end)
}

// failed sends a step whose training forward an error unwound (failed:
// ipc.FailedOOM or ipc.FailedError) after it saved acts bytes, in a loop
// that caught the error and went on: zero_grad and the forward, whose end
// edge says failed, its peak acts above the memory held.
func (s *synth) failed(acts int64, why string) {
	base := s.weights + s.held + 2*s.weights
	s.phase("zero_grad", base+s.weights, base, base+s.weights, 0, false)
	s.msg(map[string]any{"type": "phase", "name": "forward", "step": s.step, "edge": "begin", "user": false, "mem": s.mem(base, base)})
	s.mono += 0.01
	s.msg(map[string]any{"type": "phase", "name": "forward", "step": s.step, "edge": "end", "user": false,
		"mem": s.mem(base, base+acts), "failed": why})
	s.step++
	s.mono += 0.05
}

func (s *synth) anatomy(acts, batch int64) {
	s.msg(map[string]any{"type": "anatomy", "step": s.step, "weights": s.weights, "gradients": s.weights,
		"optimizer": 2 * s.weights, "activations": acts, "batch_size": batch, "params": s.weights / 4, "device": "cuda",
		"activations_step": s.step, "activations_batch": batch, "activations_source": "measured"})
}

func (s *synth) goodbye(reason string) {
	s.msg(map[string]any{"type": "goodbye", "reason": reason, "stats": map[string]any{"created": s.seq + 1}})
	s.disconnect()
}

func (s *synth) disconnect() {
	s.line(map[string]any{"t": synthWall + (s.mono - synthMono) + 0.001, "conn": 1, "note": map[string]any{"kind": "disconnect", "text": "connection 1 closed"}})
}

// store reads the recording back through the recording reader into a
// store, as `vramscope report` does.
func (s *synth) store(t testing.TB) *session.Store {
	t.Helper()
	r, err := record.NewReader("synth", bytes.NewReader(s.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	st := session.New()
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		st.Apply(ev)
	}
	if w := r.Warnings(); len(w) > 0 {
		t.Fatalf("reader warnings: %v", w)
	}
	return st
}

// diagnose builds the report of the only process.
func (s *synth) report(t testing.TB) Process {
	t.Helper()
	r := Build(s.store(t))
	if len(r.Processes) != 1 {
		t.Fatalf("%d processes", len(r.Processes))
	}
	return r.Processes[0]
}

func noisy(rng *rand.Rand, v int64, frac float64) int64 {
	return int64(float64(v) * (1 + frac*(2*rng.Float64()-1)))
}

func lines(p Process) string {
	var b bytes.Buffer
	for _, l := range p.Diagnosis.Lines {
		fmt.Fprintln(&b, l)
	}
	return b.String()
}

// replayed is the store a replay of the synth's recording builds: the file
// read by record.OpenReplay's paced reader, as vramscope replay reads it.
func replayed(t testing.TB, s *synth) *session.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.jsonl")
	if err := os.WriteFile(path, s.buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, open, _, err := record.OpenReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := session.New()
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return st
		}
		if err != nil {
			t.Fatal(err)
		}
		st.Apply(ev)
	}
}
