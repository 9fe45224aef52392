package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// AtOOM is what was alive at an out-of-memory error, by category, from the
// census the hook took there (docs/census.md, "At an out-of-memory error").
type AtOOM struct {
	Step int `json:"step"`
	// Weights, Gradients and Optimizer are the watched model's storages;
	// SavedInGraphs the saved tensors still in the autograd graphs the
	// named holders keep; Other the other tensors' storages.
	Weights       session.Bytes `json:"weights"`
	Gradients     session.Bytes `json:"gradients"`
	Optimizer     session.Bytes `json:"optimizer"`
	SavedInGraphs session.Bytes `json:"saved_in_graphs"`
	Other         session.Bytes `json:"other"`
	// OtherSaved is the part of Other that SavedInGraphs counts too (saved
	// tensors the collector lists, such as a layer's output the next layer
	// saved); Unknown from hooks that do not say.
	OtherSaved session.Bytes `json:"other_saved"`
	// SavedByModule splits SavedInGraphs by module, largest first (empty
	// from hooks that send no split); the rest of the modules are summed
	// in SavedRest.
	SavedByModule []SavedModule `json:"saved_by_module"`
	SavedRest     session.Bytes `json:"saved_rest"`
	// Holders are the largest holders of the other tensors.
	Holders []AtOOMHolder `json:"holders"`
	// Allocator is the caching allocator then (nil off CUDA).
	Allocator *ipc.CensusAllocator `json:"allocator"`
	// Complete is false when the census stopped at its time budget: the
	// tensor categories are then lower bounds, and Unaccounted is Unknown.
	Complete bool `json:"complete"`
	// Unaccounted is the allocator's allocated bytes the categories above
	// leave out (tensors no Python object names: saved tensors of graphs
	// without a root in Python, the allocator's own), Unknown without it.
	Unaccounted session.Bytes `json:"unaccounted"`
}

// AtOOMHolder is one holder of other tensors at the error.
type AtOOMHolder struct {
	Name  string        `json:"name"`
	Where string        `json:"where"`
	Bytes session.Bytes `json:"bytes"`
}

// SavedModule is one module's saved tensors in a census's split: Module
// nil for those no module with weights takes or made (the loss's own).
type SavedModule struct {
	Module *string       `json:"module"`
	Bytes  session.Bytes `json:"bytes"`
}

// SavedModulesOf is a census's split of saved tensors by module and the
// rest's bytes; empty from hooks that send no split.
func SavedModulesOf(sm *ipc.CensusSavedByModule) ([]SavedModule, session.Bytes) {
	out := []SavedModule{}
	if sm == nil {
		return out, 0
	}
	for _, m := range sm.Modules {
		out = append(out, SavedModule{Module: m.Module, Bytes: session.Bytes(m.Bytes)})
	}
	return out, session.Bytes(sm.Rest.Bytes)
}

// atOOMModules is how many modules the lines name; the JSON has them all.
const atOOMModules = 4

// ModuleLabel names a module of a census's saved-tensor split; nil is
// what no module with weights takes or made.
func ModuleLabel(m *string) string {
	if m == nil {
		return "outside modules with weights"
	}
	return *m
}

// ModulesText names the first n of ms with their bytes, then the others'
// and rest's sum: "blocks.3 1.2 GiB; blocks.2 1.1 GiB; other modules 3 GiB".
func ModulesText(ms []SavedModule, rest session.Bytes, n int) string {
	var parts []string
	for i, m := range ms {
		if i >= n {
			rest += m.Bytes
			continue
		}
		parts = append(parts, ModuleLabel(m.Module)+" "+m.Bytes.Human())
	}
	if rest > 0 {
		parts = append(parts, "other modules "+rest.Human())
	}
	return strings.Join(parts, "; ")
}

// atOOM reads the newest out-of-memory census; nil when none came.
func atOOM(p *session.Process) *AtOOM {
	var c *session.Census
	for i := len(p.Censuses) - 1; i >= 0; i-- {
		if p.Censuses[i].Reason == ipc.CensusOOM {
			c = &p.Censuses[i]
			break
		}
	}
	if c == nil {
		return nil
	}
	g := &c.Groups
	a := &AtOOM{Step: c.Step, Weights: session.Bytes(g.Parameters.Bytes), Gradients: session.Bytes(g.Gradients.Bytes),
		Optimizer: session.Bytes(g.Optimizer.Bytes), Other: session.Bytes(g.Other.Bytes), Allocator: c.Allocator,
		Complete: c.Census.Complete, OtherSaved: session.Unknown, Unaccounted: session.Unknown}
	a.SavedByModule, a.SavedRest = SavedModulesOf(c.SavedByModule)
	for i := range c.Holders {
		h := &c.Holders[i]
		a.SavedInGraphs += session.Bytes(h.GraphSaved)
		if len(a.Holders) < 3 {
			ref := RefOf(h)
			a.Holders = append(a.Holders, AtOOMHolder{Name: h.Name, Where: ref.Where(), Bytes: session.Bytes(h.Bytes + h.GraphSaved)})
		}
	}
	if sm := c.SavedByModule; sm != nil {
		// Each saved storage once in the census, where holders whose
		// graphs overlap (a step's output and a tensor inside it) each
		// count the shared part.
		a.SavedInGraphs = session.Bytes(sm.Total())
		if sm.AlsoOther != nil {
			a.OtherSaved = min(session.Bytes(*sm.AlsoOther), a.Other, a.SavedInGraphs)
		}
	}
	if al := c.Allocator; al != nil && al.Allocated != nil && a.Complete {
		named := a.Weights + a.Gradients + a.Optimizer + a.OtherOutside() + a.SavedInGraphs
		if rest := session.Bytes(*al.Allocated) - named; rest >= 0 {
			a.Unaccounted = rest
		}
	}
	return a
}

// OtherOutside is the other tensors' bytes that SavedInGraphs does not
// count: Other less OtherSaved, all of Other where the overlap is unknown.
func (a *AtOOM) OtherOutside() session.Bytes {
	if a.OtherSaved.Known() {
		return a.Other - a.OtherSaved
	}
	return a.Other
}

// Lines say what was alive, then the allocator's side. The categories of
// the first line are disjoint where the hook says the overlap.
func (a *AtOOM) Lines() []string {
	other := "other tensors " + a.OtherOutside().Human()
	if !a.OtherSaved.Known() && a.SavedInGraphs > 0 {
		other += " (some may be saved in those graphs too)"
	}
	parts := []string{"weights " + a.Weights.Human(), "gradients " + a.Gradients.Human(),
		"optimizer state " + a.Optimizer.Human(), "saved in kept graphs " + a.SavedInGraphs.Human(), other}
	if a.Unaccounted.Known() {
		parts = append(parts, "not named by any Python object "+a.Unaccounted.Human())
	}
	head := fmt.Sprintf("alive at the out-of-memory error (step %d): %s", a.Step, strings.Join(parts, ", "))
	if !a.Complete {
		head += "; the census stopped at its time budget: lower bounds"
	}
	lines := []string{head}
	if len(a.SavedByModule) > 0 {
		lines = append(lines, "  saved activations by module: "+ModulesText(a.SavedByModule, a.SavedRest, atOOMModules))
	}
	if len(a.Holders) > 0 {
		var hs []string
		for _, h := range a.Holders {
			s := h.Name + " " + h.Bytes.Human()
			if h.Where != "" {
				s += " (" + h.Where + ")"
			}
			hs = append(hs, s)
		}
		lines = append(lines, "  other tensors held by: "+strings.Join(hs, "; "))
	}
	if al := a.Allocator; al != nil {
		var s []string
		if al.Cache != nil {
			s = append(s, "cache "+session.Bytes(*al.Cache).Human())
		}
		if al.FreeInCache != nil && al.LargestFree != nil {
			s = append(s, fmt.Sprintf("free in cache %s, largest free block %s", session.Bytes(*al.FreeInCache).Human(), session.Bytes(*al.LargestFree).Human()))
		}
		if al.Requested != nil {
			r := "request " + session.Bytes(*al.Requested).Human()
			if al.DeviceFree != nil {
				r += " against " + session.Bytes(*al.DeviceFree).Human() + " free on the device"
			}
			s = append(s, r)
		}
		if al.NonPyTorch != nil {
			s = append(s, "non-PyTorch "+session.Bytes(*al.NonPyTorch).Human())
		}
		if len(s) > 0 {
			lines = append(lines, "  allocator: "+strings.Join(s, ", "))
		}
		if al.Fragmented != nil && *al.Fragmented {
			l := "  fragmentation: the cache had room for the request, in no single block"
			if al.Expandable == nil || !*al.Expandable {
				l += " → PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
			}
			lines = append(lines, l)
		}
	}
	return lines
}
