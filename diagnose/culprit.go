package diagnose

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// CulpritNamed is how many growing holders a diagnosis lists at most.
const CulpritNamed = 5

// Culprits compares two censuses of the hook (docs/census.md, "What grew"):
// the newest and the one before it at an earlier step. A holder grew when
// it holds more tensors, more autograd graphs or more graph nodes at the
// second census than at the first; bytes alone do not count (a buffer
// replaced by a larger one, an input that grows, is no accumulation).
type Culprits struct {
	// From and To are the steps of the two censuses; Complete is false
	// when either stopped at its time budget (the figures are then bounds).
	From     int  `json:"from_step"`
	To       int  `json:"to_step"`
	Complete bool `json:"complete"`
	// Grew are the holders that grew, most bytes per step first (then
	// graphs, then nodes per step), at most CulpritNamed.
	Grew []Culprit `json:"grew"`
	// Device is the device the tensors were counted on.
	Device string `json:"device"`
}

// HolderRef names a holder as the hook did (ipc.CensusHolder): its kind,
// name, the type holding the tensors, and where in the source (Line 0:
// unknown).
type HolderRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Container string `json:"container"`
	Function  string `json:"function"`
	File      string `json:"file"`
	Line      int    `json:"line"`
}

// RefOf is the HolderRef of a census holder.
func RefOf(h *ipc.CensusHolder) HolderRef {
	r := HolderRef{Kind: h.Kind, Name: h.Name, Container: h.Container, Function: h.Function, File: h.File}
	if h.Line != nil {
		r.Line = *h.Line
	}
	return r
}

// Culprit is one holder that grew between two censuses.
type Culprit struct {
	HolderRef
	// Tensors, Bytes, Graphs, GraphNodes and GraphSaved are what it held at
	// the second census; GraphsFreed is true when backward had freed the
	// saved tensors of every graph it keeps (so none is counted).
	Tensors     int64 `json:"tensors"`
	Bytes       int64 `json:"bytes"`
	Graphs      int64 `json:"graphs"`
	GraphNodes  int64 `json:"graph_nodes"`
	GraphSaved  int64 `json:"graph_saved"`
	GraphsFreed bool  `json:"graphs_freed"`
	// FirstStep and LastStep are the steps the oldest and newest of its
	// graphs were first seen at (-1: no graph).
	FirstStep int `json:"first_step"`
	LastStep  int `json:"last_step"`
	// Per step, over the steps between the censuses: tensors, bytes
	// (storages and the saved tensors of its graphs), graphs and nodes.
	TensorsPerStep float64 `json:"tensors_per_step"`
	BytesPerStep   float64 `json:"bytes_per_step"`
	GraphsPerStep  float64 `json:"graphs_per_step"`
	NodesPerStep   float64 `json:"nodes_per_step"`
}

func holderKey(h *ipc.CensusHolder) string {
	return h.Kind + "\x00" + h.Name + "\x00" + h.Function + "\x00" + h.File
}

// CulpritsOf compares the process's two newest censuses taken at different
// steps; nil with fewer than two, or when nothing grew.
func CulpritsOf(p *session.Process) *Culprits {
	cs := p.Censuses
	if len(cs) < 2 {
		return nil
	}
	b := &cs[len(cs)-1]
	var a *session.Census
	for i := len(cs) - 2; i >= 0; i-- {
		if cs[i].Step < b.Step && cs[i].Device == b.Device {
			a = &cs[i]
			break
		}
	}
	if a == nil {
		return nil
	}
	before := make(map[string]*ipc.CensusHolder, len(a.Holders))
	for i := range a.Holders {
		before[holderKey(&a.Holders[i])] = &a.Holders[i]
	}
	steps := float64(b.Step - a.Step)
	out := &Culprits{From: a.Step, To: b.Step, Complete: a.Complete && b.Census.Complete, Device: b.Device}
	for i := range b.Holders {
		h := &b.Holders[i]
		o := before[holderKey(h)]
		if o == nil || !(h.Tensors > o.Tensors || h.Graphs > o.Graphs || h.GraphNodes > o.GraphNodes) {
			continue
		}
		c := Culprit{
			HolderRef: RefOf(h), Tensors: h.Tensors, Bytes: h.Bytes, Graphs: h.Graphs, GraphNodes: h.GraphNodes, GraphSaved: h.GraphSaved,
			GraphsFreed: h.Graphs > 0 && h.GraphFreed == h.Graphs, FirstStep: -1, LastStep: -1,
			TensorsPerStep: float64(h.Tensors-o.Tensors) / steps,
			BytesPerStep:   float64(h.Bytes+h.GraphSaved-o.Bytes-o.GraphSaved) / steps,
			GraphsPerStep:  float64(h.Graphs-o.Graphs) / steps,
			NodesPerStep:   float64(h.GraphNodes-o.GraphNodes) / steps,
		}
		if h.FirstStep != nil {
			c.FirstStep = *h.FirstStep
		}
		if h.LastStep != nil {
			c.LastStep = *h.LastStep
		}
		out.Grew = append(out.Grew, c)
	}
	if len(out.Grew) == 0 {
		return nil
	}
	sort.SliceStable(out.Grew, func(i, j int) bool {
		x, y := &out.Grew[i], &out.Grew[j]
		if x.BytesPerStep != y.BytesPerStep {
			return x.BytesPerStep > y.BytesPerStep
		}
		if x.GraphsPerStep != y.GraphsPerStep {
			return x.GraphsPerStep > y.GraphsPerStep
		}
		return x.NodesPerStep > y.NodesPerStep
	})
	if len(out.Grew) > CulpritNamed {
		out.Grew = out.Grew[:CulpritNamed]
	}
	return out
}

// Where is the holder's place in the source: "in train(), train.py:19"
// (the file's base name), "in module __main__, train.py:3", or its class
// file for an attribute.
func (c *HolderRef) Where() string {
	var parts []string
	switch c.Kind {
	case ipc.HolderLocal:
		if c.Function != "" {
			parts = append(parts, "in "+c.Function+"()")
		}
	case ipc.HolderGlobal:
		if c.Function != "" {
			parts = append(parts, "global of "+c.Function)
		}
	}
	if c.File != "" {
		f := filepath.Base(c.File)
		if c.Line > 0 {
			f += fmt.Sprintf(":%d", c.Line)
		}
		parts = append(parts, f)
	}
	return strings.Join(parts, ", ")
}

// Holds says what the holder keeps, per step: "+1 tensor, +1 autograd
// graph (7 nodes; backward freed their saved tensors) and 4 B per step".
func (c *Culprit) Holds() string {
	var parts []string
	if c.TensorsPerStep > 0 {
		parts = append(parts, "+"+count(c.TensorsPerStep, "tensor"))
	}
	if c.GraphsPerStep > 0 || c.NodesPerStep > 0 {
		g := ""
		if c.GraphsPerStep > 0 {
			g = "+" + count(c.GraphsPerStep, "autograd graph") + " ("
		} else {
			g = "its autograd graph grows ("
		}
		g += count(c.NodesPerStep, "node")
		switch {
		case c.GraphsFreed:
			g += "; backward freed their saved tensors"
		case c.GraphSaved > 0:
			g += "; saved tensors still in them"
		}
		parts = append(parts, g+")")
	}
	bytes := session.Bytes(0)
	if c.BytesPerStep > 0 {
		bytes = session.Bytes(c.BytesPerStep)
	}
	return strings.Join(parts, ", ") + " and " + bytes.Human() + " per step"
}

// Text is the culprit in one line: who, where, what it holds per step.
func (c *Culprit) Text() string {
	w := c.Where()
	if w != "" {
		w = " " + w
	}
	graphs := ""
	if c.Graphs > 0 && c.FirstStep >= 0 && c.LastStep > c.FirstStep {
		graphs = fmt.Sprintf(" (graphs of steps ≤%d–%d)", c.FirstStep, c.LastStep)
	}
	return fmt.Sprintf("%s (%s)%s keeps %s%s", c.Name, c.Container, w, c.Holds(), graphs)
}

// Headline is the culprits' banner: the largest holder that grew, and how
// many others did.
func (cs *Culprits) Headline() string {
	h := "held by " + cs.Grew[0].Text()
	if n := len(cs.Grew) - 1; n > 0 {
		h += fmt.Sprintf(" (+%d more)", n)
	}
	return h
}

// Lines are one line per holder that grew, after a line saying between
// which censuses.
func (cs *Culprits) Lines() []string {
	head := fmt.Sprintf("what grew between the censuses of steps %d and %d (%s tensors)", cs.From, cs.To, cs.Device)
	if !cs.Complete {
		head += "; a census stopped at its time budget: lower bounds"
	}
	lines := []string{head}
	for i := range cs.Grew {
		lines = append(lines, "  "+cs.Grew[i].Text())
	}
	return lines
}

func count(v float64, noun string) string {
	s := fmt.Sprintf("%.3g", v)
	if v == float64(int64(v)) {
		s = fmt.Sprintf("%d", int64(v))
	}
	if v != 1 {
		noun += "s"
	}
	return s + " " + noun
}
