package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// HeadSteps and TailSteps bound the text table of a long session: the
// first HeadSteps and the last TailSteps steps are printed, with a line
// saying how many were left out. The JSON always has every step.
const (
	HeadSteps = 5
	TailSteps = 5
	// FailedShown is how many failed steps between them are shown still.
	FailedShown = 8
)

// WriteText writes the report for a terminal: per process a header, the
// step × phase table (MiB), the totals, the anatomy and the diagnosis.
// Text from the hook or the file (host, argv, names, diagnosis lines that
// quote them) is escaped by textesc: no control byte reaches the terminal.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	start := "no events"
	if r.Start != nil {
		start = r.Start.Format("2006-01-02 15:04:05 MST")
	}
	fmt.Fprintf(bw, "vramscope report · %s · %s · %.2f s\n", start, plural(r.processCount(), "process", "processes"), r.DurationS)
	if r.Begins != "" {
		fmt.Fprintf(bw, "recording %s\n", r.Begins)
	}
	if r.Errors > 0 {
		fmt.Fprintf(bw, "%d bad messages skipped\n", r.Errors)
	}
	estimates := false
	r.eachProcess(func(p *Process) error {
		bw.WriteString("\n")
		p.writeText(bw)
		estimates = estimates || p.Diagnosis.Need.Batch != nil
		return nil
	})
	if estimates { // once, not once per process
		bw.WriteString("\nevery batch estimate above assumes:\n")
		for _, a := range diagnose.BatchAssumptions {
			fmt.Fprintf(bw, "  - %s\n", a)
		}
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
	if p.host() {
		fmt.Fprintf(w, "\n  totals: %s%s in %.2f s · peak RSS %s%s\n", plural(t.Steps, "step", "steps")+failedNote(t.Failed), p.modelCounts(), t.DurationS,
			mib(t.PeakAllocated), peakSite(t.PeakAllocatedStep, t.PeakAllocatedPhase, t.PeakAllocatedPhaseAs))
	} else {
		fmt.Fprintf(w, "\n  totals: %s%s in %.2f s · peak allocated %s%s · peak reserved %s%s\n",
			plural(t.Steps, "step", "steps")+failedNote(t.Failed), p.modelCounts(), t.DurationS,
			mib(t.PeakAllocated), peakSite(t.PeakAllocatedStep, t.PeakAllocatedPhase, t.PeakAllocatedPhaseAs),
			mib(t.PeakReserved), site(t.PeakReservedStep, t.PeakReservedPhase))
	}
	if p.NoOptimizer {
		w.WriteString("  no optimizer watched: a step ends at the model's next training forward after a backward\n")
	}
	if p.PartialStep >= 0 {
		fmt.Fprintf(w, "  step %d is partial (the process ended in it): left out of the totals and the pattern\n", p.PartialStep)
	}
	if p.UnfinishedStep >= 0 {
		fmt.Fprintf(w, "  step %d did not reach an update before the process ended (no optimizer.step() after its last backward: micro-batches the loop never stepped, or a skipped update): left out of the totals and the pattern\n", p.UnfinishedStep)
	}
	p.writeAnatomy(w)
	if p.Census != nil {
		p.Census.writeText(w)
	}
	w.WriteString("\n  diagnosis\n")
	for _, l := range p.Diagnosis.Lines {
		fmt.Fprintf(w, "    %s\n", textesc.String(l))
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
	parts = append(parts, "host "+orDash(textesc.String(p.Host)))
	if j := p.Job; j != nil {
		parts = append(parts, j.label())
	}
	parts = append(parts, p.deviceLabel())
	torch := "–"
	if p.Torch != nil {
		torch = textesc.String(*p.Torch)
	}
	parts = append(parts, "torch "+torch)
	fmt.Fprintf(w, "%s\n", strings.Join(parts, " · "))

	hook := "hook: not reported"
	if h := p.Hook; h != nil {
		exact := "off"
		if h.ExactPeaks || h.ResetPeaks {
			exact = "on"
		}
		hook = fmt.Sprintf("hook %s · %g Hz samples · exact peaks %s · activations every %d steps", orDash(textesc.String(h.Version)), h.SampleHz, exact, h.ActivationsEvery)
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
		fmt.Fprintf(w, "  argv: %s\n", textesc.Strings(p.Argv, " "))
	}
	if m := p.Memory; m != nil && m.Kind != ipc.SourceCUDA {
		fmt.Fprintf(w, "  memory: %s\n", m.What)
		for _, na := range m.NotAvailable {
			fmt.Fprintf(w, "  not available: %s\n", na)
		}
	}
}

// writeTable prints the step × phase table, eliding the middle of a long
// session.
func (p *Process) writeTable(w *bufio.Writer) {
	if len(p.Steps) == 0 {
		w.WriteString("\n  no finished phase\n")
		return
	}
	if p.host() {
		p.writeHostTable(w)
		return
	}
	nvml := p.NVML != ""
	named, width, stepW := p.tableWidths()
	head := fmt.Sprintf("\n  %*s  %-*s  %9s  %9s  %9s  %9s", stepW, "step", width, "phase", "alloc end", "peak", "reserved", "peak res")
	if nvml {
		head += fmt.Sprintf("  %9s  %11s", "NVML peak", "non-PyTorch")
	}
	legend := "(MiB; ≥ lower bound; = inferred)"
	if nvml {
		legend = "(MiB; ≥ lower bound; = inferred; stale: no NVML process reading during the phase)"
	}
	fmt.Fprintf(w, "%s   %s\n", head, legend)
	phaseRow := func(step string, ph *Phase) {
		fmt.Fprintf(w, "  %*s  %-*s  %9s  %9s  %9s  %9s", stepW+len(step)-utf8.RuneCountInString(step), step, width, textesc.String(ph.Phase),
			ph.AllocatedEnd.MiBString(), ph.peakText(), ph.ReservedEnd.MiBString(), ph.PeakReserved.MiBString())
		if nvml {
			gpu, other := ph.NVMLPeak.MiBString(), ph.NonPyTorch.MiBString()
			if ph.NVMLStale {
				// Read before the phase (1 Hz process list): not a figure
				// of it, nor is what is derived from it (764
				// beside 3551 reserved, which the driver cannot show).
				gpu, other = "stale", "stale"
			}
			fmt.Fprintf(w, "  %9s  %11s", gpu, other)
		}
		w.WriteString("\n")
	}
	row := func(st *Step) {
		if st.Plain {
			// Read once: no training phase rows, the step's own line says
			// it all; a user phase (an evaluation, between_steps) reads at
			// its own edges and has a row.
			fmt.Fprintf(w, "  %5d  %s\n", st.Step, st.summary())
			for i := range st.Phases {
				if ph := &st.Phases[i]; ph.User && ph.Read {
					phaseRow("", ph)
				}
			}
			return
		}
		for i := range st.Phases {
			step := ""
			if i == 0 {
				step = fmt.Sprint(st.Step)
				if named && st.Model != "" {
					step += " " + textesc.String(st.Model)
				}
			}
			phaseRow(step, &st.Phases[i])
		}
		if line := st.summary(); line != "" {
			fmt.Fprintf(w, "  %5s  %s\n", "", line)
		}
	}
	p.eachShownStep(w, stepW, row)
}

// eachShownStep writes the rows of the steps a table shows: all of them,
// or the first HeadSteps and the last TailSteps with a line for those
// elided between (stepW: the step column's width), the first
// FailedShown failed steps among them kept, then says when the store kept
// fewer steps than the process ran.
func (p *Process) eachShownStep(w *bufio.Writer, stepW int, row func(*Step)) {
	n := len(p.Steps)
	if n <= HeadSteps+TailSteps {
		for i := range p.Steps {
			row(&p.Steps[i])
		}
	} else {
		for i := range p.Steps[:HeadSteps] {
			row(&p.Steps[i])
		}
		mid, run, shown := p.Steps[HeadSteps:n-TailSteps], 0, 0
		for i := range mid {
			if mid[i].Failed == "" || shown == FailedShown {
				run++
				continue
			}
			if run > 0 {
				fmt.Fprintf(w, "  %*s  … %s elided …\n", stepW, "", plural(run, "step", "steps"))
			}
			row(&mid[i])
			run, shown = 0, shown+1
		}
		if shown == 0 {
			fmt.Fprintf(w, "  %*s  … %d steps elided (first %d and last %d of %d shown) …\n", stepW, "", n-HeadSteps-TailSteps, HeadSteps, TailSteps, n)
		} else if run > 0 {
			fmt.Fprintf(w, "  %*s  … %s elided …\n", stepW, "", plural(run, "step", "steps"))
		}
		for i := n - TailSteps; i < n; i++ {
			row(&p.Steps[i])
		}
	}
	if kept, total := len(p.Steps), p.StepsTotal+p.Totals.Failed; kept < total {
		fmt.Fprintf(w, "  (the store kept %d of %d steps: the first and the most recent)\n", kept, total)
	}
}

func (p *Process) writeAnatomy(w *bufio.Writer) {
	a := &p.Anatomy
	w.WriteString("\n  anatomy (MiB)             now   at peak\n")
	now, peak := a.Now.List(), a.Peak.List()
	for i := range now {
		name := now[i].Name
		atPeak := peak[i].Bytes.MiBString()
		if a.Peak.ProcessUsedStale && !peak[i].Bytes.Known() && (now[i].Name == "non-PyTorch" || now[i].Name == "other processes") {
			atPeak = "stale" // derived from an NVML process reading not taken during the peak's phase
		}
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", textesc.String(name), now[i].Bytes.MiBString(), atPeak)
	}
	if a.Now.ActivationsStale || a.Peak.ActivationsStale {
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "activ.+temporaries", a.Now.Transient.MiBString(), a.Peak.Transient.MiBString())
	}
	if p.host() {
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "= RSS", a.Now.Allocated.MiBString(), a.Peak.Allocated.MiBString())
	} else {
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "= allocated", a.Now.Allocated.MiBString(), a.Peak.Allocated.MiBString())
		fmt.Fprintf(w, "    %-18s  %9s  %8s\n", "= reserved", a.Now.Reserved.MiBString(), a.Peak.Reserved.MiBString())
	}
	if m := a.Measured; m != nil {
		batch := "–"
		if m.BatchSize != nil {
			batch = fmt.Sprint(*m.BatchSize)
		}
		fmt.Fprintf(w, "    measured at step %d on %s: %.1f M parameters, batch %s\n", m.Step, orDash(textesc.String(m.Device)), float64(m.Params)/1e6, batch)
	} else {
		w.WriteString("    no anatomy from the hook yet\n")
	}
	fmt.Fprintf(w, "    now: %s · at peak: %s\n", textesc.String(diagnose.Where(a.Now.Step, a.Now.Phase)), textesc.String(diagnose.Where(a.Peak.Step, a.Peak.Phase)))
	for _, n := range diagnose.ActivationsNotes(diagnose.Breakdown{Now: a.Now, Peak: a.Peak}) {
		fmt.Fprintf(w, "    %s\n", textesc.String(n))
	}
	writeHolders(w, a.Holders)
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
	return " (" + textesc.String(diagnose.Where(step, phase)) + ")"
}

// peakSite is site for the allocated peak, whose phase may be taken from
// the step it repeats.
func peakSite(step int, phase string, phaseAs int) string {
	if step < 0 {
		return ""
	}
	if phaseAs >= 0 && phase != "" {
		return fmt.Sprintf(" (%s; read once: the phases of step %d, which it repeats)",
			textesc.String(diagnose.Where(step, phase)), phaseAs)
	}
	return " (" + textesc.String(diagnose.PeakWhere(step, phase, phaseAs)) + ")"
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

// writeHolders is the by-module split of the saved activations: the
// modules and the loss with their shares, then the largest blocks.
func writeHolders(w *bufio.Writer, h *diagnose.Holders) {
	if h == nil {
		return
	}
	loss := "the loss's: not measured"
	if h.Loss.Known() {
		loss = "the loss's " + h.Loss.Human()
	}
	fmt.Fprintf(w, "    saved for backward at step %d: %s (the model's forward %s + %s)\n", h.Step, h.Saved.Human(), h.Activations.Human(), loss)
	for _, e := range h.Modules {
		fmt.Fprintf(w, "      %s  %9s  %3.0f%%\n", padRight(e.Label(), 34), e.Bytes.Human(), 100*e.Share)
	}
	if h.Rest.Count > 0 {
		fmt.Fprintf(w, "      %s  %9s  %3.0f%%\n", padRight(fmt.Sprintf("(%s more)", plural(int(h.Rest.Count), "module", "modules")), 34), h.Rest.Bytes.Human(), 100*h.Rest.Share)
	}
	var blocks []string
	for _, b := range h.Blocks {
		blocks = append(blocks, fmt.Sprintf("%s %s (%.0f%%)", b.Label(), b.Bytes.Human(), 100*b.Share))
	}
	if len(blocks) > 0 {
		fmt.Fprintf(w, "    largest blocks: %s\n", strings.Join(blocks, ", "))
	}
	if h.Loss.Known() && h.Loss > 0 {
		fmt.Fprintf(w, "    the loss's saved tensors (%s) are not in activations: from loss to backward they are part of other/temporaries\n", h.Loss.Human())
	}
}

// padRight pads s with spaces to n runes (the labels hold "×").
func padRight(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// peakText is a phase's allocated peak as the tables write it: "≥" before a
// bound, "=" before an inferred peak.
func (ph *Phase) peakText() string {
	peak := ph.PeakAllocated.MiBString()
	switch {
	case ph.PeakInferred:
		return "=" + peak
	case !ph.PeakExact && ph.PeakAllocated.Known():
		return "≥" + peak
	}
	return peak
}

// summary is the step's own line under its phases: its peak, how that is
// known, and the memory it held at its end.
func (st *Step) summary() string {
	if !st.PeakAllocated.Known() {
		return ""
	}
	var how string
	switch st.Peak {
	case session.Exact:
		how = "step peak " + st.PeakAllocated.MiBString() + " MiB"
		switch {
		case st.Plain && st.SameAs >= 0 && st.Skipped:
			// One phase fewer than step SameAs: only its figures match.
			how = fmt.Sprintf("same peak and held memory as step %d (%s): %s", st.SameAs, within(st.Within), how)
		case st.Plain && st.SameAs >= 0:
			how = fmt.Sprintf("same phases as step %d (%s): %s", st.SameAs, within(st.Within), how)
		case st.Moved:
			how = "read once, moved beyond noise (the next step is read by phase): " + how
		case st.Plain:
			how = "read once: " + how
		}
	case session.Inferred:
		how = fmt.Sprintf("step peak %s MiB (inferred: same as step %d, every phase ended at the same bytes)", st.PeakAllocated.MiBString(), st.SameAs)
	default:
		how = "step peak ≥ " + st.PeakAllocated.MiBString() + " MiB (not exact)"
	}
	if st.Held.Known() {
		how += " · held " + st.Held.MiBString() + " MiB"
	}
	return how + st.endMarks()
}

// endMarks is how the step ended when it did not update: " · optimizer
// step skipped", " · failed: …", or "".
func (st *Step) endMarks() string {
	var marks string
	if st.Skipped {
		marks += " · optimizer step skipped"
	}
	switch st.Failed {
	case ipc.FailedOOM:
		marks += " · failed: out of memory, caught (the loop went on)"
	case ipc.FailedError:
		marks += " · failed: an error the loop caught"
	}
	return marks
}

// failedNote is " and N failed" for N failed steps (Totals.Failed), "" for none.
func failedNote(n int) string {
	if n == 0 {
		return ""
	}
	return " and " + plural(n, "failed step", "failed steps")
}

// within is "exact to the byte" or "within 2 MiB".
func within(b session.Bytes) string {
	if b == 0 {
		return "exact to the byte"
	}
	return "within " + b.Human()
}

// tableWidths is what both step × phase tables (allocator and host) pad
// to: the widest phase name, and the step column, which carries each
// step's watch name after its number ("0 D") when several watches stepped.
func (p *Process) tableWidths() (named bool, width, stepW int) {
	width, stepW = len("phase"), 5
	for _, st := range p.Steps {
		for _, ph := range st.Phases {
			width = max(width, len(textesc.String(ph.Phase)))
		}
	}
	if named = len(p.Models) > 1; named {
		for _, st := range p.Steps {
			stepW = max(stepW, len(fmt.Sprint(st.Step))+1+utf8.RuneCountInString(textesc.String(st.Model)))
		}
	}
	return named, width, stepW
}

// label is "job 81234 (slurm, step 0, node gpu-3)", or "pod ml/worker-2"
// for a pod with no job id; every part escaped.
func (j *Job) label() string {
	var more []string
	for _, kv := range [][2]string{{"", j.Source}, {"step ", j.Step}, {"node ", j.Node}} {
		if kv[1] != "" {
			more = append(more, kv[0]+textesc.String(kv[1]))
		}
	}
	if j.Pod != "" {
		pod := textesc.String(j.Pod)
		if j.Namespace != "" {
			pod = textesc.String(j.Namespace) + "/" + pod
		}
		more = append(more, "pod "+pod)
	}
	out := "job " + orDash(textesc.String(j.ID))
	if len(more) > 0 {
		out += " (" + strings.Join(more, ", ") + ")"
	}
	return out
}
