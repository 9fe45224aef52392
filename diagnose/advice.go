package diagnose

import (
	"fmt"

	"github.com/vramscope/vramscope/session"
)

// noGradAdvice is the advice for an evaluation that ran with gradients
// enabled (Diagnosis.EvalGradStep), on the device and on a CPU run alike.
const noGradAdvice = "run the evaluation under torch.no_grad() (or torch.inference_mode()): with gradients enabled " +
	"each forward saves its activations for a backward that never comes, kept as long as its output"

// advise lists the suggestions the measurements call for, each with the
// numbers behind it.
func advise(d *Diagnosis) []Advice {
	var out []Advice
	switch d.Pattern {
	case PatternGrowth:
		how := "least-squares fit from the change point"
		if st := d.Stairs; st != nil {
			how = fmt.Sprintf("%d rises of +%s MiB, every %d steps", st.Count, st.Rise.MiBString(), st.Every)
		}
		because := fmt.Sprintf("peak grows %s/step from step %d to %d (%s)", d.GrowthPerStep.Human(), d.GrowthFrom, d.GrowthTo, how)
		switch d.GrowthKind {
		case GrowthLeak:
			if d.HeldPerStep.Known() {
				because += fmt.Sprintf("; memory held between steps grows %s/step", d.HeldPerStep.Human())
			}
			out = append(out, Advice{
				Text:    fmt.Sprintf("look for tensors kept across steps since step %d (e.g. accumulating `loss` instead of `loss.item()`, lists of outputs, caches keyed by step)", d.GrowthFrom),
				Because: because,
			})
		default:
			if d.HeldFrom.Known() {
				because += fmt.Sprintf("; memory held between steps %s→%s MiB", d.HeldFrom.MiBString(), d.HeldTo.MiBString())
			}
			out = append(out, Advice{
				Text:    "cap the input size (batch, sequence length) at what fits: the peak follows it; activation checkpointing or gradient accumulation let a larger input fit",
				Because: because,
			})
		}
	case PatternWarmup:
		// Only when the first steps peaked above a steady peak that is
		// known: a warmup that rose to the steady need is that need.
		if d.PeakAfterKnown.Is.Stated() && d.warmupHigh {
			out = append(out, Advice{
				Text:    "nothing to fix: the first steps' peak is not a requirement, the steady peak is what matters",
				Because: fmt.Sprintf("step %d peaked at %s MiB, steady peak %s MiB since step %d", d.WarmupStep, d.WarmupPeak.MiBString(), d.PeakAfter.MiBString(), d.SteadyFrom),
			})
		}
	}
	if d.EvalGradStep >= 0 {
		because := fmt.Sprintf("the evaluation after step %d ran a forward of the model in eval mode with gradients enabled", d.EvalGradStep)
		for _, u := range d.Phases {
			if u.Name == session.EvalPhase {
				because += "; " + u.Line()
			}
		}
		out = append(out, Advice{Text: noGradAdvice, Because: because})
	}
	if n := d.Need; n.PhaseName == session.EvalPhase && n.PhasePeak.Known() {
		out = append(out, Advice{
			Text: "the evaluation needs more than training: keep fewer of its outputs (reduce each batch's to what the metric needs), " +
				"run it under torch.inference_mode() or no_grad, and move what you keep to the CPU (.cpu()) as you go",
			Because: fmt.Sprintf("eval peaks at %s MiB, %s MiB above the training need of %s MiB", n.PhasePeak.MiBString(), (n.PhasePeak - n.Allocated).MiBString(), n.Allocated.MiBString()),
		})
	}
	if n := d.Need; n.PhaseName == session.BetweenPhase && n.PhasePeak.Known() {
		step := -1
		for _, u := range d.Phases {
			if u.Name == n.PhaseName {
				step = u.Step
			}
		}
		out = append(out, Advice{
			Text: fmt.Sprintf("something between steps %d and %d that is no forward of the watched model "+
				"(another model's evaluation, an EMA copy, a checkpoint) needs more than training: "+
				"name it with `with vramscope.phase(\"...\")` to see what it is and when", step, step+1),
			Because: fmt.Sprintf("between steps %d and %d memory peaks at %s MiB, %s MiB above the training need of %s MiB",
				step, step+1, n.PhasePeak.MiBString(), (n.PhasePeak - n.Allocated).MiBString(), n.Allocated.MiBString()),
		})
	}
	pk := &d.Layers.Peak
	if share, ok := shareOf(d.Peak.DominantBytes, pk.Allocated); ok && share >= DominantShare {
		because := fmt.Sprintf("%s %s MiB = %.0f%% of the %s MiB peak (%s)", d.Peak.Dominant, d.Peak.DominantBytes.MiBString(), 100*share, pk.Allocated.MiBString(), d.Peak.Where())
		switch d.Peak.Dominant {
		case "activations", TransientName:
			if activationsLive(d.Peak.Phase) { // no activations exist in an evaluation
				out = append(out, Advice{Text: "activation checkpointing, or smaller micro-batches with gradient accumulation", Because: because})
			}
		case "optimizer state":
			out = append(out, Advice{Text: "lighter optimizer state (8-bit Adam, Adafactor) or shard it (ZeRO, FSDP)", Because: because})
		}
	}
	if o := d.Spike; o.Reported {
		w := d.Layers.Peak.Weights
		because := fmt.Sprintf("optimizer.step() peaks %s MiB above its start (step %d)", o.Bytes.MiBString(), o.Step)
		if w > 0 {
			because += fmt.Sprintf(" = %.1f× the weights", float64(o.Bytes)/float64(w))
		}
		out = append(out, Advice{
			Text: "the optimizer's foreach implementation (the CUDA default) makes temporaries for the whole model at once: " +
				"pass fused=True (Adam, AdamW, SGD: one kernel, no whole-model temporaries) or foreach=False (a per-parameter loop: temporaries of one parameter at a time, slower)",
			Because: because,
		})
	}
	if cache, ok := shareOf(pk.Cache, pk.Reserved); ok && d.AllocRetries > 0 && cache >= CacheShare {
		out = append(out, Advice{
			Text:    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to cut fragmentation",
			Because: fmt.Sprintf("%d allocator retries; cache %s MiB = %.0f%% of reserved at the peak", d.AllocRetries, pk.Cache.MiBString(), 100*cache),
		})
	}
	return out
}

// shareOf is part/whole; ok is false when either is unknown or whole is 0.
func shareOf(part, whole session.Bytes) (float64, bool) {
	if !part.Known() || !whole.Known() || whole == 0 {
		return 0, false
	}
	return float64(part) / float64(whole), true
}
