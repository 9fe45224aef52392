package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/session"
)

// HeadSteps and TailSteps bound the text table of a long session: the
// first HeadSteps and the last TailSteps steps are printed, with a line
// saying how many were left out. The JSON always has every step.
const (
	HeadSteps = 5
	TailSteps = 5
)

// WriteText writes the report for a terminal: per process a header, the
// step × phase table (MiB), the totals, the anatomy and the diagnosis.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	start := "no events"
	if r.Start != nil {
		start = r.Start.Format("2006-01-02 15:04:05 MST")
	}
	fmt.Fprintf(bw, "vramscope report · %s · %s · %.2f s\n", start, plural(len(r.Processes), "process", "processes"), r.DurationS)
	if r.Errors > 0 {
		fmt.Fprintf(bw, "%d bad messages skipped\n", r.Errors)
	}
	for i := range r.Processes {
		bw.WriteString("\n")
		r.Processes[i].writeText(bw)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write text report: %w", err)
	}
	return nil
}

func (p *Process) writeText(w *bufio.Writer) {
	p.writeHeader(w)
	p.writeTable(w)
	t := &p.Totals
	fmt.Fprintf(w, "\n  totals: %s%s in %.2f s · peak allocated %s%s · peak reserved %s%s\n",
		plural(t.Steps, "step", "steps"), p.modelCounts(), t.DurationS,
		mib(t.PeakAllocated), site(t.PeakAllocatedStep, t.PeakAllocatedPhase),
		mib(t.PeakReserved), site(t.PeakReservedStep, t.PeakReservedPhase))
	if p.NoOptimizer {
		w.WriteString("  no optimizer watched: a step ends at the model's next training forward after a backward\n")
	}
	if p.PartialStep >= 0 {
		fmt.Fprintf(w, "  step %d is partial (the process ended in it): left out of the totals and the pattern\n", p.PartialStep)
	}
	p.writeAnatomy(w)
	w.WriteString("\n  diagnosis\n")
	for _, l := range p.Diagnosis.Lines {
		fmt.Fprintf(w, "    %s\n", l)
	}
	if b := p.Diagnosis.Need.Batch; b != nil {
		w.WriteString("    the batch estimate assumes:\n")
		for _, a := range b.Assumes {
			fmt.Fprintf(w, "      - %s\n", a)
		}
	}
}

// modelCounts is " (D 20, G 20)": the steps of each watch name, when the
// process named more than one.
func (p *Process) modelCounts() string {
	if len(p.Models) < 2 && !p.ModelsCut {
		return ""
	}
	parts := make([]string, 0, len(p.Models)+1)
	for _, m := range p.Models {
		parts = append(parts, fmt.Sprintf("%s %d", m.Model, m.Steps))
	}
	if p.ModelsCut {
		parts = append(parts, "more names not counted")
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func (p *Process) writeHeader(w *bufio.Writer) {
	parts := []string{"pid " + fmt.Sprint(p.PID)}
	if p.Rank != nil {
		rank := fmt.Sprintf("rank %d", *p.Rank)
		if p.WorldSize != nil {
			rank += fmt.Sprintf("/%d", *p.WorldSize)
		}
		parts = append(parts, rank)
	}
	parts = append(parts, "host "+orDash(p.Host))
	if d := p.Device; d != nil {
		parts = append(parts, fmt.Sprintf("%s (cuda:%d, %s)", d.Name, d.Index, d.Total.Human()))
	} else {
		parts = append(parts, "CPU (no CUDA device)")
	}
	torch := "–"
	if p.Torch != nil {
		torch = *p.Torch
	}
	parts = append(parts, "torch "+torch)
	fmt.Fprintf(w, "%s\n", strings.Join(parts, " · "))

	hook := "hook: not reported"
	if h := p.Hook; h != nil {
		reset := "off"
		if h.ResetPeaks {
			reset = "on"
		}
		hook = fmt.Sprintf("hook %s · %g Hz samples · reset_peaks %s · activations every %d steps", orDash(h.Version), h.SampleHz, reset, h.ActivationsEvery)
	}
	nvml := "no NVML data"
	switch p.NVML {
	case "process":
		nvml = "NVML per process"
	case "device":
		nvml = "NVML device only (per-process memory not visible)"
	}
	fmt.Fprintf(w, "  %s · %s · lost %d · dropped %d\n", hook, nvml, p.Lost, p.Dropped)
	if len(p.Argv) > 0 {
		fmt.Fprintf(w, "  argv: %s\n", strings.Join(p.Argv, " "))
	}
}

// writeTable prints the step × phase table, eliding the middle of a long
// session.
func (p *Process) writeTable(w *bufio.Writer) {
	if len(p.Steps) == 0 {
		w.WriteString("\n  no finished phase\n")
		return
	}
	nvml := p.NVML != ""
	width := len("phase")
	for _, st := range p.Steps {
		for _, ph := range st.Phases {
			width = max(width, len(ph.Phase))
		}
	}
	// Several watches: each step's name after its number ("0 D").
	named := len(p.Models) > 1
	stepW := 5
	if named {
		for _, st := range p.Steps {
			stepW = max(stepW, len(fmt.Sprint(st.Step))+1+utf8.RuneCountInString(st.Model))
		}
	}
	head := fmt.Sprintf("\n  %*s  %-*s  %9s  %9s  %9s  %9s", stepW, "step", width, "phase", "alloc end", "peak", "reserved", "peak res")
	if nvml {
		head += fmt.Sprintf("  %9s  %11s", "NVML peak", "non-PyTorch")
	}
	legend := "(MiB; ≥ lower bound)"
	if nvml {
		legend = "(MiB; ≥ lower bound; ' NVML read before the phase)"
	}
	fmt.Fprintf(w, "%s   %s\n", head, legend)
	row := func(st *Step) {
		for i, ph := range st.Phases {
			step := ""
			if i == 0 {
				step = fmt.Sprint(st.Step)
				if named && st.Model != "" {
					step += " " + st.Model
				}
			}
			peak := ph.PeakAllocated.MiBString()
			if !ph.PeakExact && ph.PeakAllocated.Known() {
				peak = "≥" + peak
			}
			fmt.Fprintf(w, "  %*s  %-*s  %9s  %9s  %9s  %9s", stepW+len(step)-utf8.RuneCountInString(step), step, width, ph.Phase,
				ph.AllocatedEnd.MiBString(), peak, ph.ReservedEnd.MiBString(), ph.PeakReserved.MiBString())
			if nvml {
				gpu := ph.NVMLPeak.MiBString()
				if ph.NVMLStale {
					gpu += "'" // not a figure of this phase (1 Hz process list)
				}
				fmt.Fprintf(w, "  %9s  %11s", gpu, ph.NonPyTorch.MiBString())
			}
			w.WriteString("\n")
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
		fmt.Fprintf(w, "  %*s  … %d steps elided (first %d and last %d of %d shown) …\n", stepW, "", n-HeadSteps-TailSteps, HeadSteps, TailSteps, n)
		for i := n - TailSteps; i < n; i++ {
			row(&p.Steps[i])
		}
	}
	if kept := len(p.Steps); kept < p.StepsTotal {
		fmt.Fprintf(w, "  (the store kept %d of %d steps: the first and the most recent)\n", kept, p.StepsTotal)
	}
}

func (p *Process) writeAnatomy(w *bufio.Writer) {
	a := &p.Anatomy
	w.WriteString("\n  anatomy (MiB)             now   at peak\n")
	now, peak := a.Now.List(), a.Peak.List()
	for i := range now {
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", now[i].Name, now[i].Bytes.MiBString(), peak[i].Bytes.MiBString())
	}
	if a.Now.ActivationsStale || a.Peak.ActivationsStale {
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "activ.+temporaries", a.Now.Transient.MiBString(), a.Peak.Transient.MiBString())
	}
	fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "= allocated", a.Now.Allocated.MiBString(), a.Peak.Allocated.MiBString())
	fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "= reserved", a.Now.Reserved.MiBString(), a.Peak.Reserved.MiBString())
	if m := a.Measured; m != nil {
		batch := "–"
		if m.BatchSize != nil {
			batch = fmt.Sprint(*m.BatchSize)
		}
		fmt.Fprintf(w, "    measured at step %d on %s: %.1f M parameters, batch %s\n", m.Step, orDash(m.Device), float64(m.Params)/1e6, batch)
	} else {
		w.WriteString("    no anatomy from the hook yet\n")
	}
	fmt.Fprintf(w, "    now: %s · at peak: %s\n", diagnose.Where(a.Now.Step, a.Now.Phase), diagnose.Where(a.Peak.Step, a.Peak.Phase))
	for _, n := range diagnose.ActivationsNotes(diagnose.Breakdown{Now: a.Now, Peak: a.Peak}) {
		fmt.Fprintf(w, "    %s\n", n)
	}
	if a.Peak.ProcessUsedStale {
		line := "    NVML process at peak: stale, no reading (1 Hz) during the peak's phase"
		if a.Peak.DeviceUsed.Known() {
			line += "; device used then (10 Hz) ≤ " + a.Peak.DeviceUsed.MiBString() + " MiB"
		}
		w.WriteString(line + "\n")
	}
}

// site is " (backward of step 1)", "" when the step is unknown.
func site(step int, phase string) string {
	if step < 0 {
		return ""
	}
	return " (" + diagnose.Where(step, phase) + ")"
}

// mib is "4329 MiB", or "–" when unknown.
func mib(b session.Bytes) string {
	if !b.Known() {
		return "–"
	}
	return b.MiBString() + " MiB"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
