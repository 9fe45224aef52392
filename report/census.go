package report

import (
	"bufio"
	"fmt"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// Census is the newest census of the live tensors the hook sent
// (docs/census.md), in the report's own terms.
type Census struct {
	Step   int    `json:"step"`
	Reason string `json:"reason"`
	Device string `json:"device"`
	// Tensors is how many tensor objects on the device the hook saw.
	Tensors int64 `json:"tensors"`
	// Groups are the storages of parameters, gradients, optimizer state
	// and other tensors, each storage counted once.
	Groups []CensusGroup `json:"groups"`
	// Holders name the roots of the other tensors, largest first.
	Holders []CensusHolder `json:"holders"`
	// UnattributedBytes are other tensors whose root was not found.
	UnattributedBytes session.Bytes `json:"unattributed_bytes"`
	// Complete is false when the census stopped at its time budget.
	Complete bool `json:"complete"`
	// CostMS is what the census cost the training thread.
	CostMS float64 `json:"cost_ms"`
	// SavedByModule splits the saved tensors still in the holders' graphs,
	// each storage once, by module (docs/census.md); empty from hooks that
	// send no split.
	SavedByModule []diagnose.SavedModule `json:"saved_by_module"`
	SavedRest     session.Bytes          `json:"saved_rest"`
	// Capture is the newest allocator history window (CUDA), nil when none.
	Capture *Capture `json:"capture"`
}

// Capture is an allocator history window: the snapshot file beside the
// recording, the steps, its entries against the cap, its cost, and the
// sites whose allocations made in it are still live, most bytes first.
type Capture struct {
	File       string        `json:"file"`
	FromStep   int           `json:"from_step"`
	ToStep     int           `json:"to_step"`
	Entries    int64         `json:"entries"`
	MaxEntries int64         `json:"max_entries"`
	CostMS     float64       `json:"cost_ms"`
	Sites      []CaptureSite `json:"sites"`
}

// CaptureSite is one allocation site: file, line, function, and its live
// bytes and allocations made in the window.
type CaptureSite struct {
	File     string        `json:"file"`
	Line     int           `json:"line"`
	Function string        `json:"function"`
	Bytes    session.Bytes `json:"bytes"`
	Count    int64         `json:"count"`
}

// CensusGroup is one group of storages.
type CensusGroup struct {
	Name    string        `json:"name"`
	Bytes   session.Bytes `json:"bytes"`
	Tensors int64         `json:"tensors"`
}

// CensusHolder is one root and what is under it.
type CensusHolder struct {
	diagnose.HolderRef
	Tensors    int64         `json:"tensors"`
	Bytes      session.Bytes `json:"bytes"`
	Graphs     int64         `json:"graphs"`
	GraphNodes int64         `json:"graph_nodes"`
	// GraphSaved are the saved tensors still in its graphs; GraphFreed
	// how many of the graphs backward has run through (saved tensors freed).
	GraphSaved session.Bytes `json:"graph_saved"`
	GraphFreed int64         `json:"graph_freed"`
}

func censusOf(p *session.Process) *Census {
	if len(p.Censuses) == 0 {
		return nil
	}
	c := &p.Censuses[len(p.Censuses)-1]
	out := &Census{Step: c.Step, Reason: c.Reason, Device: c.Device, Tensors: c.Tensors,
		UnattributedBytes: session.Bytes(c.Unattributed.Bytes), Complete: c.Census.Complete, CostMS: c.CostMS.Total,
		Holders: []CensusHolder{}}
	g := &c.Groups
	out.Groups = []CensusGroup{
		{"parameters", session.Bytes(g.Parameters.Bytes), g.Parameters.Tensors},
		{"gradients", session.Bytes(g.Gradients.Bytes), g.Gradients.Tensors},
		{"optimizer state", session.Bytes(g.Optimizer.Bytes), g.Optimizer.Tensors},
		{"other", session.Bytes(g.Other.Bytes), g.Other.Tensors},
	}
	out.Capture = captureOf(p)
	out.SavedByModule, out.SavedRest = diagnose.SavedModulesOf(c.SavedByModule)
	for i := range c.Holders {
		h := &c.Holders[i]
		out.Holders = append(out.Holders, CensusHolder{HolderRef: diagnose.RefOf(h), Tensors: h.Tensors, Bytes: session.Bytes(h.Bytes),
			Graphs: h.Graphs, GraphNodes: h.GraphNodes, GraphSaved: session.Bytes(h.GraphSaved), GraphFreed: h.GraphFreed})
	}
	return out
}

// captureOf is the newest census's capture window, nil when none came.
func captureOf(p *session.Process) *Capture {
	for i := len(p.Censuses) - 1; i >= 0; i-- {
		k := p.Censuses[i].Capture
		if k == nil {
			continue
		}
		out := &Capture{File: k.File, FromStep: k.FromStep, ToStep: k.ToStep, Entries: k.Entries,
			MaxEntries: k.MaxEntries, CostMS: k.CostMS, Sites: []CaptureSite{}}
		for _, s := range k.Sites {
			line := 0
			if s.Line != nil {
				line = *s.Line
			}
			out.Sites = append(out.Sites, CaptureSite{File: s.File, Line: line, Function: s.Function, Bytes: session.Bytes(s.Bytes), Count: s.Count})
		}
		return out
	}
	return nil
}

func (c *Census) writeText(w *bufio.Writer) {
	bound := ""
	if !c.Complete {
		bound = ", stopped at its time budget: lower bounds"
	}
	fmt.Fprintf(w, "\n  census of live %s tensors at step %d (%s; %d tensors; %.1f ms%s)\n",
		textesc.String(c.Device), c.Step, textesc.String(c.Reason), c.Tensors, c.CostMS, bound)
	for _, g := range c.Groups {
		fmt.Fprintf(w, "    %-18s  %12s  %6d tensors\n", g.Name, g.Bytes.Human(), g.Tensors)
	}
	for _, h := range c.Holders {
		where := textesc.String(h.Function)
		if h.File != "" {
			where += " " + textesc.String(h.File)
			if h.Line > 0 {
				where += fmt.Sprintf(":%d", h.Line)
			}
		}
		graphs := ""
		if h.Graphs > 0 {
			graphs = fmt.Sprintf(", %d graphs of %d nodes", h.Graphs, h.GraphNodes)
			if h.GraphFreed == h.Graphs {
				graphs += " (backward freed their saved tensors)"
			} else {
				graphs += fmt.Sprintf(" (%s saved still in them)", h.GraphSaved.Human())
			}
		}
		fmt.Fprintf(w, "    %s %s (%s) %s: %d tensors, %s%s\n", textesc.String(h.Kind), textesc.String(h.Name),
			textesc.String(h.Container), where, h.Tensors, h.Bytes.Human(), graphs)
	}
	if c.UnattributedBytes > 0 {
		fmt.Fprintf(w, "    no root found for %s of other tensors\n", c.UnattributedBytes.Human())
	}
	if len(c.SavedByModule) > 0 {
		fmt.Fprintf(w, "    saved tensors in these graphs by module: %s\n",
			textesc.String(diagnose.ModulesText(c.SavedByModule, c.SavedRest, len(c.SavedByModule))))
	}
	if k := c.Capture; k != nil {
		file := "not written"
		if k.File != "" {
			file = textesc.String(k.File)
		}
		fmt.Fprintf(w, "    allocator history, steps %d–%d: %d entries of %d, %.1f ms; snapshot %s\n",
			k.FromStep, k.ToStep, k.Entries, k.MaxEntries, k.CostMS, file)
		for _, s := range k.Sites {
			site := "(no Python frame recorded)"
			if s.File != "" {
				site = fmt.Sprintf("%s:%d %s()", textesc.String(s.File), s.Line, textesc.String(s.Function))
			}
			fmt.Fprintf(w, "      %s: %s still live in %d allocations\n", site, s.Bytes.Human(), s.Count)
		}
	}
}
