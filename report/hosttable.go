package report

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vramscope/vramscope/internal/textesc"
)

// writeHostTable prints a CPU run's step × phase table: the RSS at each
// phase's end, the phase's peak RSS and its time.
func (p *Process) writeHostTable(w *bufio.Writer) {
	named, width, stepW := p.tableWidths()
	legend := "MiB of host RSS; ≥ lower bound; = inferred"
	if p.accumulates() {
		legend += "; N× ms: N micro-steps, their times summed"
	}
	fmt.Fprintf(w, "\n  %*s  %-*s  %9s  %9s  %12s   (%s)\n", stepW, "step", width, "phase", "rss end", "peak rss", "ms", legend)
	row := func(st *Step) {
		for i := range st.Phases {
			ph := &st.Phases[i]
			step := ""
			if i == 0 {
				step = fmt.Sprint(st.Step)
				if named && st.Model != "" {
					step += " " + textesc.String(st.Model)
				}
			}
			ms := strconv.FormatFloat(ph.DurationS*1000, 'f', 2, 64)
			if ph.Count > 1 {
				ms = fmt.Sprintf("%d× %s", ph.Count, ms)
			}
			fmt.Fprintf(w, "  %*s  %-*s  %9s  %9s  %12s\n", stepW+len(step)-utf8.RuneCountInString(step), step, width,
				textesc.String(ph.Phase), ph.AllocatedEnd.MiBString(), ph.peakText(), ms)
		}
		if marks := st.endMarks(); marks != "" {
			// a step that skipped its update or failed says so under its phases
			fmt.Fprintf(w, "  %*s  %s\n", stepW, "", strings.TrimPrefix(marks, " · "))
		}
	}
	p.eachShownStep(w, 5, row)
}

// accumulates reports whether a phase of some step ran more than once
// (gradient accumulation, or a model called several times per step).
func (p *Process) accumulates() bool {
	for i := range p.Steps {
		for _, ph := range p.Steps[i].Phases {
			if ph.Count > 1 {
				return true
			}
		}
	}
	return false
}
