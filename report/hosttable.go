package report

import (
	"bufio"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/vramscope/vramscope/internal/textesc"
)

// writeHostTable prints a CPU run's step × phase table: the RSS at each
// phase's end, the phase's peak RSS and its time.
func (p *Process) writeHostTable(w *bufio.Writer) {
	named, width, stepW := p.tableWidths()
	fmt.Fprintf(w, "\n  %*s  %-*s  %9s  %9s  %9s   (MiB of host RSS; ≥ lower bound; = inferred)\n", stepW, "step", width, "phase", "rss end", "peak rss", "ms")
	row := func(st *Step) {
		for i, ph := range st.Phases {
			step := ""
			if i == 0 {
				step = fmt.Sprint(st.Step)
				if named && st.Model != "" {
					step += " " + textesc.String(st.Model)
				}
			}
			peak := ph.PeakAllocated.MiBString()
			switch {
			case ph.PeakInferred:
				peak = "=" + peak
			case !ph.PeakExact && ph.PeakAllocated.Known():
				peak = "≥" + peak
			}
			ms := strconv.FormatFloat((ph.EndS-ph.StartS)*1000, 'f', 2, 64)
			fmt.Fprintf(w, "  %*s  %-*s  %9s  %9s  %9s\n", stepW+len(step)-utf8.RuneCountInString(step), step, width,
				textesc.String(ph.Phase), ph.AllocatedEnd.MiBString(), peak, ms)
		}
	}
	n := len(p.Steps)
	if n <= HeadSteps+TailSteps {
		for i := range p.Steps {
			row(&p.Steps[i])
		}
	} else {
		for i := range p.Steps[:HeadSteps] {
			row(&p.Steps[i])
		}
		fmt.Fprintf(w, "  %5s  … %d steps elided (first %d and last %d of %d shown) …\n", "", n-HeadSteps-TailSteps, HeadSteps, TailSteps, n)
		for i := n - TailSteps; i < n; i++ {
			row(&p.Steps[i])
		}
	}
	if kept := len(p.Steps); kept < p.StepsTotal {
		fmt.Fprintf(w, "  (the store kept %d of %d steps: the first and the most recent)\n", kept, p.StepsTotal)
	}
}

// hostLayerName is an anatomy row's name on a CPU run, "" for a row that
// has no meaning there (the allocator cache, the driver's views).
func hostLayerName(name string) string {
	switch name {
	case "other/temporaries":
		return "rest of process"
	case "allocator cache", "non-PyTorch", "other processes":
		return ""
	}
	return name
}
