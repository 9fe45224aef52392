package diagnose

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Thresholds of the by-module advice (docs/anatomy.md, "Advice").
const (
	// CheckpointShare is the share of the saved tensors a block's estimated
	// checkpointing saving must reach to be named.
	CheckpointShare = 0.10
	// CheckpointNamed is how many blocks the advice names at most.
	CheckpointNamed = 3
	// LossShare is the share of the saved tensors from which the loss's
	// own dominate; LossLargestShare the lower share that is enough when
	// the loss also holds the largest single tensor.
	LossShare        = 0.25
	LossLargestShare = 0.10
)

// Holders says who holds the tensors autograd saved for backward in the
// hook's last measurement: the model's modules and the loss, outside the
// model (docs/anatomy.md, "By module").
type Holders struct {
	// Step is the step the split was measured at.
	Step int `json:"step"`
	// Activations is what the model's forward saved; Loss what was saved
	// between the forward's end and the backward's start (Unknown when not
	// measured); Saved their sum (Activations alone when Loss is Unknown).
	Activations session.Bytes `json:"activations"`
	Loss        session.Bytes `json:"loss"`
	LossLargest session.Bytes `json:"loss_largest"`
	LossTensors int64         `json:"loss_tensors"`
	Saved       session.Bytes `json:"saved"`
	// Modules are the hook's top modules and the loss, largest first; Rest
	// sums the modules the hook left out (Count of them).
	Modules []Holder `json:"modules"`
	Rest    Holder   `json:"rest"`
	// Blocks are the units the advice speaks of, largest first; BlocksRest
	// sums those the hook left out.
	Blocks     []Block `json:"blocks"`
	BlocksRest Block   `json:"blocks_rest"`
	// Checkpoint are the blocks worth checkpointing, largest saving first.
	Checkpoint []Block `json:"checkpoint"`
	// LossDominates is true when the loss's own saved tensors call for the
	// loss remedies (LossShare, LossLargestShare).
	LossDominates bool `json:"loss_dominates"`
	// LossLargestItem is true when the loss's largest tensor is at least
	// as large as every module's largest.
	LossLargestItem bool `json:"loss_largest_item"`
}

// Holder is one entry of the by-module list.
type Holder struct {
	// Module is the collapsed path ("blocks.*.mlp"; "" the model's own
	// ops); Outside marks the loss entry, which is no module.
	Module  string        `json:"module"`
	Outside bool          `json:"outside"`
	Count   int64         `json:"count"`
	Bytes   session.Bytes `json:"bytes"`
	Largest session.Bytes `json:"largest"`
	// Share is Bytes / Holders.Saved.
	Share float64 `json:"share"`
}

// Block is one unit: a repeated block or a child of the model.
type Block struct {
	Module string `json:"module"`
	Count  int64  `json:"count"`
	// Own is true when only the module's own ops count (its repeated
	// blocks are units of their own); Kept is then Unknown.
	Own   bool          `json:"own"`
	Bytes session.Bytes `json:"bytes"`
	// Kept is what a checkpoint of each unit would keep (its inputs);
	// Saving the estimated saving of checkpointing them, Bytes − Kept.
	Kept   session.Bytes `json:"kept"`
	Saving session.Bytes `json:"saving"`
	Share  float64       `json:"share"`
}

// Label is the entry as the views show it: "blocks.*.mlp ×4", "(model)"
// for the model's own ops, "loss (outside the model)"; every character
// that is not printable is escaped.
func (h Holder) Label() string {
	if h.Outside {
		return "loss (outside the model)"
	}
	return moduleLabel(h.Module, h.Count)
}

// Label is the block as the views show it ("blocks.* ×12").
func (b Block) Label() string {
	l := moduleLabel(b.Module, b.Count)
	if b.Own {
		l += " (own ops)"
	}
	return l
}

func moduleLabel(m string, count int64) string {
	if m == "" {
		m = "(model)"
	} else {
		m = Printable(m)
	}
	if count > 1 {
		m += fmt.Sprintf(" ×%d", count)
	}
	return m
}

// Printable escapes what a terminal would take for a control: every rune
// that is not a graphic character, and the backslash, become \u{...}.
func Printable(s string) string {
	ok := true
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == '\\' || r == unicode.ReplacementChar {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == '\\' || r == unicode.ReplacementChar {
			fmt.Fprintf(&b, `\u{%x}`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// HoldersOf reads the by-module split of a process's anatomy: nil when the
// hook sent none (an older hook, or no measurement yet).
func HoldersOf(a *session.Anatomy) *Holders {
	if a == nil || a.Saved == nil || !a.SavedActivations.Known() {
		return nil
	}
	s := a.Saved
	h := &Holders{Step: a.SavedStep, Activations: a.SavedActivations, Loss: session.Unknown, LossLargest: session.Unknown}
	h.Saved = h.Activations
	if l := s.Loss; l != nil {
		h.Loss, h.LossLargest, h.LossTensors = session.Bytes(l.Bytes), session.Bytes(l.Largest), l.Tensors
		h.Saved += h.Loss
	}
	share := func(b session.Bytes) float64 {
		if h.Saved <= 0 {
			return 0
		}
		return float64(b) / float64(h.Saved)
	}
	for _, e := range s.Modules {
		b := session.Bytes(e.Bytes)
		h.Modules = append(h.Modules, Holder{Module: e.Module, Count: e.Count, Bytes: b, Largest: session.Bytes(e.Largest), Share: share(b)})
	}
	if h.Loss.Known() && h.Loss > 0 {
		h.Modules = append(h.Modules, Holder{Outside: true, Count: 1, Bytes: h.Loss, Largest: h.LossLargest, Share: share(h.Loss)})
	}
	sort.SliceStable(h.Modules, func(i, j int) bool { return h.Modules[i].Bytes > h.Modules[j].Bytes })
	h.Rest = Holder{Count: s.Rest.Modules, Bytes: session.Bytes(s.Rest.Bytes), Largest: session.Unknown, Share: share(session.Bytes(s.Rest.Bytes))}
	for _, e := range s.Blocks {
		h.Blocks = append(h.Blocks, blockOf(e, share))
	}
	h.BlocksRest = Block{Count: s.BlocksRest.Blocks, Bytes: session.Bytes(s.BlocksRest.Bytes), Kept: session.Unknown, Saving: session.Unknown, Share: share(session.Bytes(s.BlocksRest.Bytes))}
	for _, b := range h.Blocks {
		if b.Saving.Known() && b.Saving > 0 && share(b.Saving) >= CheckpointShare {
			h.Checkpoint = append(h.Checkpoint, b)
		}
	}
	sort.SliceStable(h.Checkpoint, func(i, j int) bool { return h.Checkpoint[i].Saving > h.Checkpoint[j].Saving })
	if len(h.Checkpoint) > CheckpointNamed {
		h.Checkpoint = h.Checkpoint[:CheckpointNamed]
	}
	if h.Loss.Known() && h.Loss > 0 {
		largest := true
		for _, e := range s.Modules {
			if session.Bytes(e.Largest) > h.LossLargest {
				largest = false
			}
		}
		h.LossLargestItem = largest
		h.LossDominates = share(h.Loss) >= LossShare || (largest && share(h.Loss) >= LossLargestShare)
	}
	return h
}

func blockOf(e ipc.SavedBlock, share func(session.Bytes) float64) Block {
	b := Block{Module: e.Module, Count: e.Count, Own: e.Own, Bytes: session.Bytes(e.Bytes), Kept: session.Unknown, Saving: session.Unknown, Share: share(session.Bytes(e.Bytes))}
	if e.Kept != nil && !e.Own {
		b.Kept = session.Bytes(*e.Kept)
		b.Saving = (b.Bytes - b.Kept).Max(0)
	}
	return b
}

// Advice is the by-module advice: the blocks worth checkpointing with
// their estimated saving, and the loss's remedies when its tensors
// dominate. Empty without a split.
func (h *Holders) Advice() []Advice {
	if h == nil {
		return nil
	}
	var out []Advice
	for _, b := range h.Checkpoint {
		out = append(out, Advice{
			Text: fmt.Sprintf("checkpoint %s (torch.utils.checkpoint around each): saves about %s (estimate)",
				b.Label(), b.Saving.Human()),
			Because: fmt.Sprintf("%s saves %s for backward at step %d (%.0f%% of the %s saved); a checkpoint keeps its inputs, %s, and recomputes the rest in backward",
				b.Label(), b.Bytes.Human(), h.Step, 100*b.Share, h.Saved.Human(), b.Kept.Human()),
		})
	}
	if h.LossDominates {
		because := fmt.Sprintf("the loss saves %s outside the model at step %d (%.0f%% of the %s saved for backward)",
			h.Loss.Human(), h.Step, 100*float64(h.Loss)/float64(h.Saved), h.Saved.Human())
		if h.LossLargestItem {
			because += fmt.Sprintf("; its largest tensor, %s, is the largest single item (for cross-entropy, the log-softmax of the logits)", h.LossLargest.Human())
		}
		out = append(out, Advice{
			Text:    "shrink the loss's saved tensors: compute the cross-entropy in chunks of positions, or use a fused linear + cross-entropy kernel that never holds the whole logits; or keep the logits in bf16/fp16",
			Because: because,
		})
	}
	return out
}
