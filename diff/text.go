package diff

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
func (r *Result) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "vramscope diff · A %s · B %s · changes are B − A\n", r.A, r.B)
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
	return fmt.Sprintf("%s (%s, %s)", s.Label, steps, s.Pattern)
}

func (p *Pair) writeText(w *bufio.Writer) {
	fmt.Fprintf(w, "\nA %s  →  B %s · %d common steps\n", p.A.text(), p.B.text(), p.CommonSteps)
	if len(p.Phases) > 0 {
		fmt.Fprintf(w, "\n  %-12s %28s   %28s   %s\n", "", "peak allocated (MiB)", "peak reserved (MiB)", "most changed")
		fmt.Fprintf(w, "  %-12s %9s %9s %8s   %9s %9s %8s   %s\n", "phase", "A", "B", "Δ", "A", "B", "Δ", "step")
		for _, ph := range p.Phases {
			worst := "–"
			if ph.WorstChange != nil && *ph.WorstChange != 0 {
				worst = fmt.Sprintf("%d (%s)", ph.WorstStep, signedMiB(ph.WorstChange))
			}
			fmt.Fprintf(w, "  %-12s %9s %9s %8s   %9s %9s %8s   %s\n", ph.Phase,
				ph.PeakAllocated.A.MiBString(), ph.PeakAllocated.B.MiBString(), signedMiB(ph.PeakAllocated.Change),
				ph.PeakReserved.A.MiBString(), ph.PeakReserved.B.MiBString(), signedMiB(ph.PeakReserved.Change), worst)
		}
	}
	s := &p.Steady
	kind := "steady-state peak"
	if !s.SteadyA || !s.SteadyB {
		kind = "highest step peak (no steady state on both sides)"
	}
	fmt.Fprintf(w, "\n  %s: allocated %s → %s (%s), reserved %s → %s (%s)\n", kind,
		s.Allocated.A.Human(), s.Allocated.B.Human(), signedHuman(s.Allocated.Change),
		s.Reserved.A.Human(), s.Reserved.B.Human(), signedHuman(s.Reserved.Change))
	fmt.Fprintf(w, "  session peak allocated: %s → %s (%s)\n", s.Peak.A.Human(), s.Peak.B.Human(), signedHuman(s.Peak.Change))
	if len(p.Moved) == 0 {
		fmt.Fprintf(w, "  anatomy at the peak: no layer moved (by %s and %.0f%% of the peak or more)\n", session.Bytes(MovedFloor).Human(), MovedShare*100)
		return
	}
	var moved []string
	for _, l := range p.Layers {
		for _, m := range p.Moved {
			if l.Name == m {
				moved = append(moved, fmt.Sprintf("%s %s → %s (%s)", l.Name, l.A.Human(), l.B.Human(), signedHuman(l.Change)))
			}
		}
	}
	fmt.Fprintf(w, "  anatomy at the peak, layers that moved:\n    %s\n", strings.Join(moved, "\n    "))
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

func signedHuman(c *int64) string {
	if c == nil {
		return "unknown"
	}
	if *c < 0 {
		return "−" + session.Bytes(-*c).Human()
	}
	return "+" + session.Bytes(*c).Human()
}
