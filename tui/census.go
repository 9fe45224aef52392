package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// censusAsked is the answer of a census request made by the c key.
type censusAsked struct{ err error }

// askCensus asks the process on screen for a census (live, WithCensusAsker),
// as a command: the request is queued outside Update.
func (m *Model) askCensus() tea.Cmd {
	ask, p := m.cfg.askCensus, m.process()
	if ask == nil || m.replay != nil || p == nil || !p.Connected {
		return nil
	}
	key := p.Key
	m.censusNote = "asked the hook for a census: it answers at the end of the next step"
	return func() tea.Msg { return censusAsked{ask(key)} }
}

// censusLines is the census page: what grew between the two newest
// censuses, then the newest census, its groups and holders.
func (m *Model) censusLines(p *session.Process, d *diagnose.Diagnosis) []string {
	w := max(m.w-1, 20)
	title := rendered(&styleHeading, "Census of live tensors") + rendered(&styleDim, "  (c or esc to close)")
	if p == nil {
		return []string{title, "", "No training process yet."}
	}
	out := []string{title, rendered(&styleBold, p.Label()) + " · " + m.stateWord(p)}
	if m.censusNote != "" {
		out = append(out, rendered(&styleDim, textesc.String(m.censusNote)))
	}
	out = append(out, "")
	if d != nil && d.Culprits != nil {
		for _, l := range d.Culprits.Lines() {
			out = append(out, wrapHanging("  ", textesc.String(l), w, 4)...)
		}
		out = append(out, "")
	}
	if len(p.Censuses) == 0 {
		return append(out, "No census yet: the monitor asks for one when memory held between steps grows; c asks now (live).")
	}
	c := &p.Censuses[len(p.Censuses)-1]
	head := fmt.Sprintf("step %d · %s · %s tensors: %d · %.1f ms", c.Step, textesc.String(c.Reason), textesc.String(c.Device), c.Tensors, c.CostMS.Total)
	if !c.Complete {
		head += " · stopped at its time budget: lower bounds"
	}
	out = append(out, wrapHanging("  ", head, w, 4)...)
	g := &c.Groups
	for _, row := range []struct {
		name string
		b, n int64
	}{{"parameters", g.Parameters.Bytes, g.Parameters.Tensors}, {"gradients", g.Gradients.Bytes, g.Gradients.Tensors},
		{"optimizer state", g.Optimizer.Bytes, g.Optimizer.Tensors}, {"other", g.Other.Bytes, g.Other.Tensors}} {
		out = append(out, fmt.Sprintf("  %-16s %12s  %7d tensors", row.name, session.Bytes(row.b).Human(), row.n))
	}
	out = append(out, "", rendered(&styleHeading, "Holders of the other tensors"))
	for i := range c.Holders {
		h := &c.Holders[i]
		ref := diagnose.RefOf(h)
		l := fmt.Sprintf("%s (%s, %s) %s: %d tensors, %s", h.Name, h.Kind, h.Container, ref.Where(), h.Tensors, session.Bytes(h.Bytes).Human())
		if h.Graphs > 0 {
			l += fmt.Sprintf("; %d graphs, %d nodes", h.Graphs, h.GraphNodes)
			if h.GraphFreed == h.Graphs {
				l += ", saved tensors freed by backward"
			} else {
				l += ", " + session.Bytes(h.GraphSaved).Human() + " saved in them"
			}
		}
		out = append(out, wrapHanging("  · ", textesc.String(l), w, 4)...)
	}
	if c.Unattributed.Bytes > 0 {
		out = append(out, fmt.Sprintf("  no holder found for %s in %d tensors", session.Bytes(c.Unattributed.Bytes).Human(), c.Unattributed.Tensors))
	}
	if sm := c.SavedByModule; sm != nil && len(sm.Modules) > 0 {
		out = append(out, "", rendered(&styleHeading, "Saved tensors in those graphs, by module"))
		for _, mb := range sm.Modules {
			l := diagnose.ModuleLabel(mb.Module) + " " + session.Bytes(mb.Bytes).Human()
			out = append(out, wrapHanging("  · ", textesc.String(l), w, 4)...)
		}
		if sm.Rest.Bytes > 0 {
			out = append(out, fmt.Sprintf("  · %d more modules %s", sm.Rest.Modules, session.Bytes(sm.Rest.Bytes).Human()))
		}
	}
	return out
}
