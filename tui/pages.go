package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// page is what the body shows: the main view (chart, table, panels that
// fit) or one panel on the whole body, so every panel is reachable on an
// 80×24 terminal.
type page int

const (
	pageMain    page = iota
	pageDiag         // the whole diagnosis, wrapped, and the all-ranks summary
	pageAnatomy      // the memory anatomy panel
	pageHelp         // the keys and the glossary
	pageOutput       // the run command's output (WithOutputLog)
	pageCensus       // the newest census of the live tensors and what grew
)

// pager scrolls a page's lines. It is the pages' child model: the root
// hands it the scrolling keys while a page is open.
type pager struct {
	top int
	end bool // End/G: show the last lines, however many the page has by the next frame
}

// update scrolls n lines shown h at a time.
func (p pager) update(msg tea.KeyMsg, k keyMap, n, h int) pager {
	rows := pageRows(n, h)
	p.end = false
	switch {
	case key.Matches(msg, k.Up):
		p.top--
	case key.Matches(msg, k.Down):
		p.top++
	case key.Matches(msg, k.PgUp):
		p.top -= rows
	case key.Matches(msg, k.PgDown):
		p.top += rows
	case key.Matches(msg, k.Home):
		p.top = 0
	case key.Matches(msg, k.End):
		p.top, p.end = n, true
	}
	p.top = min(max(p.top, 0), max(n-rows, 0))
	return p
}

// clamp keeps top within n lines shown h at a time.
func (p pager) clamp(n, h int) pager {
	p.top = min(max(p.top, 0), max(n-pageRows(n, h), 0))
	return p
}

// pageRows is how many of n lines fit in h rows: all of them, or h-1 and
// a line that says where the reader is.
func pageRows(n, h int) int {
	if n <= h {
		return n
	}
	return max(h-1, 1)
}

// view renders lines from top in exactly w × h cells.
func (p pager) view(lines []string, w, h int) string {
	rows := pageRows(len(lines), h)
	top := min(max(p.top, 0), max(len(lines)-rows, 0))
	if p.end {
		// The page's height follows the banner's, which can grow between
		// the key and the frame: End keeps showing the end.
		top = max(len(lines)-rows, 0)
	}
	shown := lines[top:min(top+rows, len(lines))]
	out := strings.Join(shown, "\n")
	if rows < len(lines) {
		hint := fmt.Sprintf("lines %d–%d of %d · ↑/↓ pgup/pgdn scroll · esc back", top+1, top+len(shown), len(lines))
		out += strings.Repeat("\n", h-len(shown)) // the hint goes on the last row
		out = strings.TrimSuffix(out, "\n") + "\n" + rendered(&styleDim, hint)
	}
	return padLines(out, w, h)
}

// pageLines are the open page's lines, wrapped to the screen's width.
func (m *Model) pageLines(p *session.Process, d *diagnose.Diagnosis) []string {
	switch m.page {
	case pageDiag:
		return m.diagLines(p, d)
	case pageAnatomy:
		return m.anatomyLines(p)
	case pageHelp:
		return m.helpLines()
	case pageOutput:
		return m.outputLines()
	case pageCensus:
		return m.censusLines(p, d)
	}
	return nil
}

// diagLines is the diagnosis in full: every line wrapped, none cut.
func (m *Model) diagLines(p *session.Process, d *diagnose.Diagnosis) []string {
	w := max(m.w-1, 20)
	title := rendered(&styleHeading, "Diagnosis") + rendered(&styleDim, "  (d or esc to close)")
	if p == nil {
		return []string{title, "", "No training process yet."}
	}
	out := []string{title, rendered(&styleBold, p.Label()) + " · " + m.stateWord(p), ""}
	if d != nil {
		out = append(out, wrapHanging("", bannerText(d), w, 2)...)
		for i, l := range d.Lines() {
			l = textesc.String(l)
			switch {
			case i == 0 && l == textesc.String(d.Headline()):
				continue // the line above
			case strings.HasPrefix(l, "→ "):
				out = append(out, wrapHanging("  ", l, w, 4)...) // advice
			default:
				out = append(out, wrapHanging("  · ", l, w, 4)...)
			}
		}
		if d.Need.Batch != nil {
			out = append(out, "", "  the batch estimate assumes:")
			for _, a := range diagnose.BatchAssumptions {
				out = append(out, wrapHanging("    - ", a, w, 6)...)
			}
		}
	}
	if rl := m.ranksLines(); len(rl) > 0 {
		out = append(out, "", rendered(&styleHeading, "All processes"))
		for _, l := range rl {
			out = append(out, wrapHanging("  ", l, w, 4)...)
		}
	}
	return out
}

// anatomyLines is the anatomy panel at a readable width, with no rows cut.
func (m *Model) anatomyLines(p *session.Process) []string {
	if p == nil {
		return []string{"No training process yet."}
	}
	w := min(max(m.w, 20), 64)
	var lines []string
	if p.OnCPU() {
		lines = cpuAnatomy(diagnose.LayersOf(m.store, p).Now, max(m.w-1, 20))
	} else {
		total, _ := m.deviceTotal(p)
		s := anatomyKept(diagnose.LayersOf(m.store, p), total, w, 40)
		lines = strings.Split(s, "\n")
		for len(lines) > 1 && strings.TrimSpace(ansi.Strip(lines[len(lines)-1])) == "" {
			lines = lines[:len(lines)-1]
		}
	}
	if hl := holdersLines(diagnose.HoldersOf(p.Anatomy), max(min(m.w-1, 96), 20)); len(hl) > 0 {
		lines = append(lines, "")
		for _, l := range hl {
			if strings.HasPrefix(l, "→ ") { // advice: wrapped, never cut
				lines = append(lines, wrapHanging("", l, max(m.w-1, 20), 2)...)
			} else {
				lines = append(lines, l)
			}
		}
	}
	return append(lines, "", rendered(&styleDim, "a or esc to close · ? explains the letters"))
}

// cpuAnatomy is the anatomy of a CPU run: no allocator or GPU figures, but
// the tensors the hook measured (weights, gradients, optimizer state,
// activations), as the report gives them. It used to say there was
// nothing to break down.
func cpuAnatomy(l diagnose.Layers, w int) []string {
	out := []string{rendered(&styleHeading, "Memory anatomy"), "",
		"CPU run: no GPU memory, no allocator; the tensors the hook measured:", ""}
	rows := []struct {
		letter, name string
		b            session.Bytes
	}{{"W", "weights", l.Weights}, {"G", "gradients", l.Gradients}, {"O", "optimizer state", l.Optimizer}, {"A", "activations", l.Activations}}
	known := false
	for i, r := range rows {
		known = known || r.b.Known()
		out = append(out, rendered(&layerStyles[i], r.letter)+fmt.Sprintf(" %-17s%9s MiB", r.name, mib(r.b)))
	}
	if !known {
		out = append(out, "", "none yet: the hook measures them at its first anatomy step")
	}
	for _, n := range diagnose.ActivationsNotes(diagnose.Breakdown{Now: l}) {
		out = append(out, "")
		for _, ln := range wrapHanging("", n, w, 2) { // wrapped, never cut
			out = append(out, rendered(&styleDim, ln))
		}
	}
	return out
}

// helpLines are the keys, then the glossary.
func (m *Model) helpLines() []string {
	title := rendered(&styleHeading, "Keys") + rendered(&styleDim, "  (? or esc to close; ↑/↓ scroll)")
	out := []string{title, ""}
	out = append(out, strings.Split(m.help.FullHelpView(m.keys.FullHelp()), "\n")...)
	out = append(out, "", rendered(&styleHeading, "Glossary"))
	w := max(m.w-1, 20)
	for _, g := range glossary {
		if g[0] == "" {
			out = append(out, "", rendered(&styleBold, g[1]))
			continue
		}
		out = append(out, wrapHanging(fmt.Sprintf("  %-10s", g[0]), g[1], w, 12)...)
	}
	return out
}

// wrapHanging wraps s to w cells behind prefix, continuation lines
// indented by indent cells.
func wrapHanging(prefix, s string, w, indent int) []string {
	pw := ansi.StringWidth(prefix)
	body := ansi.Wrap(s, max(w-max(pw, indent), 10), "")
	lines := strings.Split(body, "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = prefix + lines[i]
		} else {
			lines[i] = strings.Repeat(" ", indent) + lines[i]
		}
	}
	return lines
}

// glossary explains the screen's letters and marks; an entry with no
// term starts a group.
var glossary = [][2]string{
	{"", "Chart"},
	{"alloc", "allocated: memory held by live tensors (CUDA: torch.cuda.memory_allocated; a CPU run: the process's RSS)"},
	{"max", "max allocated: the allocator's peak counter (a CPU run: the peak RSS)"},
	{"res", "reserved: what PyTorch's caching allocator holds from the driver"},
	{"nvml", "what the driver (NVML, as nvidia-smi shows it) charges the process"},
	{"z f l b s", "phases: zero_grad, forward, loss, backward, optimizer step; a capital letter is a phase you named (vramscope.phase); ┊N marks where step N starts"},
	{"", "Steps table"},
	{"end", "allocated at the end of the phase, MiB"},
	{"peak", "the most allocated during the phase, MiB; the last columns are the step's peak and its time"},
	{"≥", "a lower bound: the allocator's peak counter did not move in that phase, so this is the largest value seen (a hook with exact peaks makes it exact)"},
	{"= \"", `= inferred (repeats an exact step); " read once (same phases)`},
	{"– ·", "– unknown (no source); · the phase did not run in that step"},
	{"▲ w !", "▲ the step of the session peak; w a warmup step; ! a step that failed: a phase of it raised (an out-of-memory error) and the loop went on"},
	{"wide", "a wide terminal adds per step: peak res (the reserved peak), held (the least allocated at the step's phase edges: what stays between steps) and batch (the largest input its forwards reported)"},
	{"", "Memory anatomy (a)"},
	{"W", "weights"},
	{"G", "gradients"},
	{"O", "optimizer state"},
	{"A", "activations saved for backward (measured every few steps)"},
	{"T", "other/temporaries: allocated − W − G − O − A"},
	{"C", "allocator cache: reserved − allocated"},
	{"N", "non-PyTorch: NVML process − reserved (CUDA context, cuBLAS/NCCL workspaces)"},
	{"X", "other processes on the same device"},
	{"now", "the layers at the newest reading; at peak: at the session peak"},
	{"stale", "NVML process at peak: no per-process reading was taken at the peak (the driver's list is read once a second), so none is shown, nor non-PyTorch or other processes derived from it"},
	{"", "Header"},
	{"●", "connected; ■ exited (said goodbye); ○ disconnected (gone without goodbye)"},
	{"total", "device total: the driver's (NVML) when known, else torch's"},
	{"spread", "all ranks: the largest minus the smallest peak across processes"},
}
