package diff

import (
	"fmt"
	"io"
	"sort"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// HolderMovedFloor is how much a holder's bytes must change between the
// two sides' newest censuses to count as moved (or a holder must appear
// or go with at least as much).
const HolderMovedFloor = 1 << 20

// Holder is one holder of other tensors named in either side's newest
// census (docs/census.md): Unknown on a side whose census does not name it.
type Holder struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Delta
}

// compareHolders pairs the holders of both sides' newest censuses by kind
// and name; HoldersMoved lists those that moved by HolderMovedFloor or more.
func (pr *Pair) compareHolders(pa, pb *session.Process) {
	pr.Holders, pr.HoldersMoved = []Holder{}, []string{}
	type key struct{ kind, name string }
	sides := [2]map[key]session.Bytes{}
	for i, p := range []*session.Process{pa, pb} {
		sides[i] = map[key]session.Bytes{}
		if len(p.Censuses) == 0 {
			continue
		}
		c := &p.Censuses[len(p.Censuses)-1]
		for _, h := range c.Holders {
			sides[i][key{h.Kind, h.Name}] += session.Bytes(h.Bytes + h.GraphSaved)
		}
	}
	if len(sides[0]) == 0 && len(sides[1]) == 0 {
		return
	}
	keys := map[key]bool{}
	for i := range sides {
		for k := range sides[i] {
			keys[k] = true
		}
	}
	for k := range keys {
		a, okA := sides[0][k]
		b, okB := sides[1][k]
		if !okA {
			a = 0
		}
		if !okB {
			b = 0
		}
		h := Holder{Name: k.name, Kind: k.kind, Delta: delta(a, b)}
		pr.Holders = append(pr.Holders, h)
		if h.Change != nil && (*h.Change >= HolderMovedFloor || *h.Change <= -HolderMovedFloor) {
			pr.HoldersMoved = append(pr.HoldersMoved, k.name)
		}
	}
	sort.Slice(pr.Holders, func(i, j int) bool {
		x, y := pr.Holders[i], pr.Holders[j]
		if max(x.A, x.B) != max(y.A, y.B) {
			return max(x.A, x.B) > max(y.A, y.B)
		}
		return x.Name < y.Name
	})
	sort.Strings(pr.HoldersMoved)
}

// writeHolders is the holders that moved between the two censuses.
func writeHolders(w io.Writer, p *Pair) {
	if len(p.Holders) == 0 {
		return
	}
	if len(p.HoldersMoved) == 0 {
		fmt.Fprintf(w, "  census holders: none moved by %s or more\n", session.Bytes(HolderMovedFloor).Human())
		return
	}
	fmt.Fprintf(w, "  census holders that moved:\n")
	for _, h := range p.Holders {
		for _, n := range p.HoldersMoved {
			if h.Name == n {
				fmt.Fprintf(w, "    %s (%s) %s → %s (%s)\n", textesc.String(h.Name), textesc.String(h.Kind),
					h.A.Human(), h.B.Human(), signedHuman(h.Change))
			}
		}
	}
}
