package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// noisyRun generates the class of run that hid a leak: a GPT-2-like
// model with bf16 autocast and fused AdamW, sequence lengths varying from
// 256 to 1024, an evaluation forward every 15 steps, and (leak > 0) a
// leak of leak MiB per step from step leakFrom on.
//
// Where the figures come from: the GPT-2 session of the H100 recording
// clients.jsonl.gz ("clients.py hf_amp": 4 layers, 67 M parameters, bf16
// autocast, fused AdamW) ends zero_grad at 1283 MiB and the optimizer step
// at 1541 MiB (held: weights, gradients, AdamW state), and peaks 3543 MiB
// above zero_grad's end in backward. Its sequence length is not recorded:
// we take it as 1024, the top of the range, and scale what a step
// allocates linearly with the length (activations of a transformer at a
// fixed batch). The evaluation forward (no_grad, bf16 logits) peaks 1200
// MiB above held memory: an assumption, not a measurement. bf16 jitter is
// up to 3 MiB on each peak. The lengths and jitter come from a fixed LCG,
// so the run is the same every time.
//
// exact: the hook resets its counters at each read (the default):
// steps 0–2 are read phase by phase, later ones once, with span "step".
// Without it the hook is 0.1.0: end reads, the counter never reset.
func noisyRun(steps, leakFrom int, leak int64, exact bool) []ipc.Message {
	const (
		held0    = 1541 // MiB
		grads    = 258  // freed by zero_grad: 1541 − 1283
		fwdAct   = 2412 // forward end − zero_grad end at length 1024
		lossDrop = 441  // forward end − loss end
		bwdPeak  = 3543 // backward peak − zero_grad end
		evalPeak = 1200
	)
	seed := uint64(19)
	rnd := func(n int64) int64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int64(seed>>33) % n
	}
	mib := func(v int64) int64 { return v * session.MiB }
	run := newH100Run("noisy", 77, exact)
	add := run.add
	counter := int64(0) // the allocator's max_allocated as the hook reads it
	read := func(alloc, peak int64) *ipc.Mem {
		if exact {
			counter = max(peak, alloc) // reset at the read before
		} else {
			counter = max(counter, peak, alloc)
		}
		m := &ipc.Mem{Allocated: mib(alloc), MaxAllocated: mib(counter), Reserved: mib(counter + 600), MaxReserved: mib(counter + 600)}
		if exact {
			counter = alloc
		}
		return m
	}
	held := int64(held0)
	for i := range steps {
		l := 256 + 64*rnd(13) // 256..1024
		jit := rnd(4)
		prev := held
		if leak > 0 && i >= leakFrom {
			held += leak
		}
		zg := prev - grads
		fwd := zg + fwdAct*l/1024
		loss := fwd - lossDrop*l/1024
		peak := zg + bwdPeak*l/1024 + jit
		plain := exact && i > 2
		phase := func(name string, alloc, pk int64, last bool) {
			add(ipc.Message{Type: ipc.TypePhase, Name: name, Step: i, Edge: ipc.EdgeBegin})
			end := ipc.Message{Type: ipc.TypePhase, Name: name, Step: i, Edge: ipc.EdgeEnd}
			switch {
			case !plain:
				end.Mem = read(alloc, pk)
			case last:
				end.Mem, end.Span = read(alloc, peak), ipc.SpanStep
			}
			add(end)
		}
		phase("zero_grad", zg, prev, false)
		phase("forward", fwd, fwd, false)
		phase("loss", loss, loss, false)
		phase("backward", held, peak, false)
		phase("step", held, held, true)
		if i%15 == 14 {
			// An evaluation forward under no_grad: no loss follows it.
			add(ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: i + 1, Edge: ipc.EdgeBegin})
			add(ipc.Message{Type: ipc.TypePhase, Name: "forward", Step: i + 1, Edge: ipc.EdgeEnd, Mem: read(held, held+evalPeak)})
		}
	}
	add(ipc.Message{Type: ipc.TypeGoodbye, Reason: "exit"})
	return run.msgs
}

func TestALateLeakIsFoundInANoisyRun(t *testing.T) {
	for _, exact := range []bool{false, true} {
		s, p := storeOf(t, noisyRun(100, 40, 147, exact), false)
		d := Diagnose(s, p)
		if d.Pattern != PatternGrowth || d.GrowthKind != GrowthLeak || d.GrowthFrom != 40 ||
			d.HeldPerStep != 147*session.MiB {
			t.Errorf("exact %v: %s %s from %d, held %s/step, want a leak of 147 MiB/step from step 40: %s",
				exact, d.Pattern, d.GrowthKind, d.GrowthFrom, d.HeldPerStep.Human(), d.Headline())
		}
		if h := d.Headline(); !strings.Contains(h, "possible leak") || !strings.Contains(h, "from step 40") {
			t.Errorf("exact %v: headline %q", exact, h)
		}
	}
}

func TestANoisyRunWithoutALeakIsNoGrowth(t *testing.T) {
	for _, exact := range []bool{false, true} {
		s, p := storeOf(t, noisyRun(100, 0, 0, exact), false)
		if d := Diagnose(s, p); d.Pattern == PatternGrowth {
			t.Errorf("exact %v: %s", exact, d.Headline())
		}
	}
}
