package ipc

import (
	"fmt"
	"unicode/utf8"
)

// Bounds of an anatomy's saved object: the hook sends at most 12 modules
// and 8 blocks (docs/protocol.md); a monitor accepts up to maxSavedEntries
// of each so that a later hook may send a few more.
const (
	maxSavedEntries = 64
	maxModulePath   = 256
)

// Saved is an anatomy's split of the saved activations by module, plus the
// loss's own saved tensors (docs/protocol.md, "anatomy"; docs/anatomy.md,
// "By module"). Each list is sorted by Bytes, largest first; its rest sums
// what it leaves out, so a list's bytes plus its rest's equal Activations.
type Saved struct {
	// Modules are the innermost modules that saved the storages, repeated
	// blocks collapsed ("blocks.*.mlp"); "" is the model's own ops.
	Modules []SavedModule `json:"modules"`
	// Rest sums the module entries Modules leaves out.
	Rest SavedRest `json:"rest"`
	// Blocks are the units the checkpointing advice speaks of.
	Blocks []SavedBlock `json:"blocks"`
	// BlocksRest sums the units Blocks leaves out.
	BlocksRest SavedBlocksRest `json:"blocks_rest"`
	// Loss is what autograd saved between the forward's end and the
	// backward's start, outside the model; nil when not measured.
	Loss *SavedLoss `json:"loss"`
}

// SavedModule is one collapsed module path's saved storages.
type SavedModule struct {
	Module  string `json:"module"`
	Count   int64  `json:"count"`
	Bytes   int64  `json:"bytes"`
	Largest int64  `json:"largest"`
}

// SavedBlock is one unit's saved storages (its subtree, or its own ops when
// Own) and what a checkpoint of it would keep (nil when Own).
type SavedBlock struct {
	Module string `json:"module"`
	Count  int64  `json:"count"`
	Own    bool   `json:"own"`
	Bytes  int64  `json:"bytes"`
	Kept   *int64 `json:"kept"`
}

// SavedRest sums the module entries left out of Saved.Modules.
type SavedRest struct {
	Modules int64 `json:"modules"`
	Bytes   int64 `json:"bytes"`
}

// SavedBlocksRest sums the units left out of Saved.Blocks.
type SavedBlocksRest struct {
	Blocks int64 `json:"blocks"`
	Bytes  int64 `json:"bytes"`
}

// SavedLoss is the loss's own saved tensors: their bytes, the largest
// single storage and how many distinct storages.
type SavedLoss struct {
	Bytes   int64 `json:"bytes"`
	Largest int64 `json:"largest"`
	Tensors int64 `json:"tensors"`
}

// validate checks ranges and that each list with its rest sums to
// activations (nil: a message without the figure may not carry a split).
func (s *Saved) validate(activations *int64) error {
	if activations == nil {
		return fmt.Errorf("field saved: present without activations")
	}
	if len(s.Modules) > maxSavedEntries || len(s.Blocks) > maxSavedEntries {
		return fmt.Errorf("field saved: more than %d entries in a list", maxSavedEntries)
	}
	sum := s.Rest.Bytes
	if err := sizes(opt{"saved.rest.modules", &s.Rest.Modules}, opt{"saved.rest.bytes", &s.Rest.Bytes}); err != nil {
		return err
	}
	for i := range s.Modules {
		e := &s.Modules[i]
		if err := modulePath(e.Module); err != nil {
			return err
		}
		if e.Count < 1 || e.Count >= maxInteger {
			return fmt.Errorf("field saved.modules.count: %d is not a count", e.Count)
		}
		if err := sizes(opt{"saved.modules.bytes", &e.Bytes}, opt{"saved.modules.largest", &e.Largest}); err != nil {
			return err
		}
		if e.Largest > e.Bytes {
			return fmt.Errorf("field saved.modules.largest: %d above the entry's bytes %d", e.Largest, e.Bytes)
		}
		sum += e.Bytes
	}
	if sum != *activations {
		return fmt.Errorf("field saved.modules: sum to %d with the rest, activations is %d", sum, *activations)
	}
	sum = s.BlocksRest.Bytes
	if err := sizes(opt{"saved.blocks_rest.blocks", &s.BlocksRest.Blocks}, opt{"saved.blocks_rest.bytes", &s.BlocksRest.Bytes}); err != nil {
		return err
	}
	for i := range s.Blocks {
		b := &s.Blocks[i]
		if err := modulePath(b.Module); err != nil {
			return err
		}
		if b.Count < 1 || b.Count >= maxInteger {
			return fmt.Errorf("field saved.blocks.count: %d is not a count", b.Count)
		}
		if err := sizes(opt{"saved.blocks.bytes", &b.Bytes}, opt{"saved.blocks.kept", b.Kept}); err != nil {
			return err
		}
		sum += b.Bytes
	}
	if sum != *activations {
		return fmt.Errorf("field saved.blocks: sum to %d with the rest, activations is %d", sum, *activations)
	}
	if l := s.Loss; l != nil {
		if err := sizes(opt{"saved.loss.bytes", &l.Bytes}, opt{"saved.loss.largest", &l.Largest}, opt{"saved.loss.tensors", &l.Tensors}); err != nil {
			return err
		}
		if l.Largest > l.Bytes {
			return fmt.Errorf("field saved.loss.largest: %d above its bytes %d", l.Largest, l.Bytes)
		}
	}
	return nil
}

func modulePath(p string) error {
	if len(p) > maxModulePath || !utf8.ValidString(p) {
		return fmt.Errorf("field saved.module: longer than %d bytes or not UTF-8", maxModulePath)
	}
	return nil
}
