package diff

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// WriteJSON writes the result as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write diff json: %w", err)
	}
	return nil
}

// WriteText writes the result for a terminal: per pair the per-phase peak
// table in MiB, the steady-peak change and the anatomy layers that moved.
// Labels and phase names are escaped by textesc.
func (r *Result) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "vramscope diff · A %s · B %s · changes are B − A\n", textesc.String(r.A), textesc.String(r.B))
	if len(r.Pairs) == 0 {
		bw.WriteString("\nno processes with steps to compare\n")
	}
	for i := range r.Pairs {
		r.Pairs[i].writeText(bw)
	}
	if r.UnpairedA > 0 || r.UnpairedB > 0 {
		fmt.Fprintf(bw, "\nnot compared: %d processes of A, %d of B without a counterpart\n", r.UnpairedA, r.UnpairedB)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

func (s *Side) text() string {
	steps := fmt.Sprintf("%d steps", s.Steps)
	if len(s.Models) > 1 {
		parts := make([]string, len(s.Models))
		for i, m := range s.Models {
			parts[i] = fmt.Sprintf("%s %d", m.Model, m.Steps)
		}
		steps += ": " + strings.Join(parts, ", ")
	}
	if s.NoOptimizer {
		steps += ", no optimizer"
	}
	return fmt.Sprintf("%s (%s, %s)", textesc.String(s.Label), steps, s.Pattern)
}

func (p *Pair) writeText(w *bufio.Writer) {
	fmt.Fprintf(w, "\nA %s  →  B %s · %d common steps\n", p.A.text(), p.B.text(), p.CommonSteps)
	if len(p.Differs) > 0 {
		fmt.Fprintf(w, "  ⚠ the runs differ: %s; the deltas below compare different setups\n", strings.Join(p.Differs, ", "))
	}
	figure := p.figure()
	if figure != "" {
		p.writeOneFigurePhases(w, figure)
	} else if len(p.Phases) > 0 {
		fmt.Fprintf(w, "\n  %-12s %28s   %28s   %s\n", "", "peak allocated (MiB)", "peak reserved (MiB)", "most changed")
		fmt.Fprintf(w, "  %-12s %9s %9s %8s   %9s %9s %8s   %s\n", "phase", "A", "B", "Δ", "A", "B", "Δ", "step")
		for _, ph := range p.Phases {
			worst := "–"
			if ph.WorstChange != nil && *ph.WorstChange != 0 {
				worst = fmt.Sprintf("%d (%s)", ph.WorstStep, signedMiB(ph.WorstChange))
			}
			fmt.Fprintf(w, "  %-12s %9s %9s %8s   %9s %9s %8s   %s\n", textesc.String(ph.Phase),
				boundMiB(ph.PeakAllocated.A, ph.PeakAllocated.ABound), boundMiB(ph.PeakAllocated.B, ph.PeakAllocated.BBound), signedMiB(ph.PeakAllocated.Change),
				ph.PeakReserved.A.MiBString(), ph.PeakReserved.B.MiBString(), signedMiB(ph.PeakReserved.Change), worst)
		}
	}
	s := &p.Steady
	kind := "steady-state peak"
	if !s.SteadyA || !s.SteadyB {
		kind = "highest step peak (no steady state on both sides)"
	}
	if figure != "" { // allocated and reserved are the one figure
		fmt.Fprintf(w, "\n  %s: %s %s → %s (%s)\n", kind, figure,
			boundHuman(s.Allocated.A, s.Allocated.ABound), boundHuman(s.Allocated.B, s.Allocated.BBound), signedHuman(s.Allocated.Change))
	} else {
		fmt.Fprintf(w, "\n  %s: allocated %s → %s (%s), reserved %s → %s (%s)\n", kind,
			boundHuman(s.Allocated.A, s.Allocated.ABound), boundHuman(s.Allocated.B, s.Allocated.BBound), signedHuman(s.Allocated.Change),
			s.Reserved.A.Human(), s.Reserved.B.Human(), signedHuman(s.Reserved.Change))
	}
	var inferred []string
	for _, k := range []struct {
		side string
		k    diagnose.Known
	}{{"A", s.KnownA}, {"B", s.KnownB}} {
		if k.k.Is == session.Inferred && k.k.SameAs >= 0 {
			inferred = append(inferred, fmt.Sprintf("%s's inferred from step %d (every phase ended at the same bytes)", k.side, k.k.SameAs))
		}
	}
	if len(inferred) > 0 {
		fmt.Fprintf(w, "    (allocated: %s)\n", strings.Join(inferred, "; "))
	}
	what := "allocated"
	if figure != "" {
		what = figure
	}
	fmt.Fprintf(w, "  session peak %s: %s → %s (%s)\n", what, boundHuman(s.Peak.A, s.Peak.ABound), boundHuman(s.Peak.B, s.Peak.BBound), signedHuman(s.Peak.Change))
	defer writeAtOOM(w, p)
	defer writeHolders(w, p)
	defer writeModules(w, p)
	if len(p.Moved) == 0 {
		fmt.Fprintf(w, "  anatomy at the peak: no layer moved (by %s and %.0f%% of the peak or more)\n", session.Bytes(MovedFloor).Human(), MovedShare*100)
		return
	}
	var moved []string
	for _, l := range p.Layers {
		for _, m := range p.Moved {
			if l.Name == m {
				moved = append(moved, fmt.Sprintf("%s %s → %s (%s)", textesc.String(l.Name), l.A.Human(), l.B.Human(), signedHuman(l.Change)))
			}
		}
	}
	fmt.Fprintf(w, "  anatomy at the peak, layers that moved:\n    %s\n", strings.Join(moved, "\n    "))
}

// figure names the one figure of two runs whose allocated and reserved
// are the same (a CPU run's RSS: ipc.SourceWords), "" otherwise.
func (p *Pair) figure() string {
	if p.A.Memory != p.B.Memory {
		return ""
	}
	w, _ := ipc.WordsOf(p.A.Memory)
	return w.Figure
}

// writeOneFigurePhases is the per-phase table of two runs with one
// figure (CPU runs: the RSS): its peak (the host keeps what a phase
// touched, so the phases after a high show it again) and each phase's
// mean time per step, which is where CPU runs differ most.
func (p *Pair) writeOneFigurePhases(w *bufio.Writer, figure string) {
	if len(p.Phases) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  %-12s %28s   %28s   %s\n", "", "peak "+figure+" (MiB)", "mean time per step (ms)", "most changed")
	fmt.Fprintf(w, "  %-12s %9s %9s %8s   %9s %9s %8s   %s\n", "phase", "A", "B", "Δ", "A", "B", "Δ", "step")
	for _, ph := range p.Phases {
		worst := "–"
		if ph.WorstChange != nil && *ph.WorstChange != 0 {
			worst = fmt.Sprintf("%d (%s)", ph.WorstStep, signedMiB(ph.WorstChange))
		}
		ms := func(s float64) string { return strconv.FormatFloat(s*1000, 'f', 1, 64) }
		fmt.Fprintf(w, "  %-12s %9s %9s %8s   %9s %9s %8s   %s\n", textesc.String(ph.Phase),
			boundMiB(ph.PeakAllocated.A, ph.PeakAllocated.ABound), boundMiB(ph.PeakAllocated.B, ph.PeakAllocated.BBound), signedMiB(ph.PeakAllocated.Change),
			ms(ph.DurationA), ms(ph.DurationB), signedMS(ph.DurationB-ph.DurationA), worst)
	}
}

func signedMS(d float64) string {
	s := strconv.FormatFloat(abs64(d)*1000, 'f', 1, 64)
	switch {
	case s == "0.0":
		return "0"
	case d > 0:
		return "+" + s
	}
	return "−" + s
}

func abs64(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func signedMiB(c *int64) string {
	if c == nil {
		return "–"
	}
	v := (abs(*c) + session.MiB/2) / session.MiB
	switch {
	case v == 0:
		return "0"
	case *c < 0:
		return fmt.Sprintf("−%d", v)
	}
	return fmt.Sprintf("+%d", v)
}

// boundMiB and boundHuman write a side, "≥" before a lower bound.
func boundMiB(b session.Bytes, bound bool) string {
	if bound {
		return "≥" + b.MiBString()
	}
	return b.MiBString()
}

func boundHuman(b session.Bytes, bound bool) string {
	if bound {
		return "≥ " + b.Human() + " (not exact)"
	}
	return b.Human()
}

func signedHuman(c *int64) string {
	if c == nil {
		return "unknown"
	}
	if *c < 0 {
		return "−" + session.Bytes(-*c).Human()
	}
	return "+" + session.Bytes(*c).Human()
}

// writeModules is the by-module comparison of the saved tensors: the
// entries that moved, each side's figure and the change.
func writeModules(w io.Writer, p *Pair) {
	if !p.Saved.A.Known() && !p.Saved.B.Known() {
		return
	}
	if p.Saved.Change == nil {
		fmt.Fprintf(w, "  saved for backward by module: %s → %s (one side sent no split)\n", p.Saved.A.Human(), p.Saved.B.Human())
		return
	}
	fmt.Fprintf(w, "  saved for backward: %s → %s (%s)\n", p.Saved.A.Human(), p.Saved.B.Human(), signedHuman(p.Saved.Change))
	if len(p.ModulesMoved) == 0 {
		fmt.Fprintf(w, "    no module moved (by %.0f%% of the larger side or more)\n", ModuleMovedShare*100)
		return
	}
	for _, m := range p.Modules {
		for _, l := range p.ModulesMoved {
			if m.Label == l {
				fmt.Fprintf(w, "    %s %s → %s (%s)\n", m.Label, m.A.Human(), m.B.Human(), signedHuman(m.Change))
			}
		}
	}
}
