package tui

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/session"
)

// holdersLines is the anatomy page's "by module" list: who holds the
// tensors saved for backward in the last measurement (the modules and the
// loss, with bars of their share), then the largest blocks with the
// estimated saving of checkpointing them. Nil without a split.
func holdersLines(h *diagnose.Holders, w int) []string {
	if h == nil {
		return nil
	}
	loss := "loss not measured"
	if h.Loss.Known() {
		loss = "loss " + h.Loss.Human()
	}
	out := []string{
		rendered(&styleHeading, "Saved for backward, by module"),
		styleDim.Render(clip(fmt.Sprintf("step %d: %s = model's forward %s + %s", h.Step, h.Saved.Human(), h.Activations.Human(), loss), w)),
	}
	labelW := min(max(w-24, 8), 34)
	barW := max(w-labelW-19, 0)
	row := func(label string, b session.Bytes, share float64, st bool) string {
		l := padRunes(clip(label, labelW), labelW)
		if st {
			l = styleBold.Render(l)
		}
		line := fmt.Sprintf("%s %8s %4.0f%% ", l, b.Human(), 100*share)
		if n := int(share*float64(barW) + 0.5); n > 0 {
			line += rendered(&styleWarn, strings.Repeat("━", min(n, barW)))
		}
		return line
	}
	for _, e := range h.Modules {
		out = append(out, row(e.Label(), e.Bytes, e.Share, e.Outside))
	}
	if h.Rest.Count > 0 {
		out = append(out, row(fmt.Sprintf("(%d more)", h.Rest.Count), h.Rest.Bytes, h.Rest.Share, false))
	}
	if len(h.Blocks) > 0 {
		out = append(out, "", rendered(&styleHeading, "Largest blocks"))
		for _, b := range h.Blocks {
			out = append(out, row(b.Label(), b.Bytes, b.Share, false))
		}
	}
	if len(h.Checkpoint) > 0 || h.LossDominates {
		out = append(out, "")
	}
	for _, b := range h.Checkpoint {
		out = append(out, fmt.Sprintf("→ checkpoint %s: saves about %s (estimate: its saved tensors %s less its inputs %s)",
			b.Label(), b.Saving.Human(), b.Bytes.Human(), b.Kept.Human()))
	}
	if h.LossDominates {
		out = append(out, fmt.Sprintf("→ the loss saves %s outside the model: chunked or fused cross-entropy, or bf16/fp16 logits (d: diagnosis)", h.Loss.Human()))
	}
	return out
}

// padRunes pads s with spaces to n runes.
func padRunes(s string, n int) string {
	if k := len([]rune(s)); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}
