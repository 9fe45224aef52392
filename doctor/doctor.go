// Package doctor answers "why does nothing show up?": it checks the socket
// the monitor and the hook would each use (path, directory and socket
// permissions, whether a monitor listens), what a given Python reports for
// torch, CUDA and the hook, and NVML's status, and says what to change
// (docs/install.md). It only reads: it creates, changes and removes nothing.
package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// Level grades one finding.
type Level int

// The levels, from fine to broken. Only Fail makes the report fail.
const (
	OK Level = iota
	Info
	Warn
	Fail
)

func (l Level) mark() string {
	switch l {
	case OK:
		return "✓"
	case Info:
		return "·"
	case Warn:
		return "!"
	}
	return "✗"
}

// Finding is one line of the report, with what to do when it is not OK.
type Finding struct {
	Level Level
	What  string // short label, e.g. "socket path"
	Text  string // the finding
	Fix   string // what to do, "" when nothing
}

// Section is a group of findings under a heading.
type Section struct {
	Title    string
	Findings []Finding
}

func (s *Section) add(l Level, what, text, fix string) {
	s.Findings = append(s.Findings, Finding{Level: l, What: what, Text: text, Fix: fix})
}

// Report is the whole answer.
type Report struct {
	Sections []Section
}

// Failed reports whether any finding is a Fail.
func (r Report) Failed() bool {
	for _, s := range r.Sections {
		for _, f := range s.Findings {
			if f.Level == Fail {
				return true
			}
		}
	}
	return false
}

// deliveryWarnings are the Warn findings about where the hook's messages
// go (no monitor at the path, one listening elsewhere), by name; a missing
// GPU or NVML is not one.
func (r Report) deliveryWarnings() []string {
	var w []string
	for _, s := range r.Sections {
		for _, f := range s.Findings {
			if f.Level == Warn && (f.What == "monitor" || f.What == "elsewhere") {
				w = append(w, f.What)
			}
		}
	}
	return w
}

// Write prints the report, one finding a line, fixes indented under it.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	for i, s := range r.Sections {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s.Title + "\n")
		for _, f := range s.Findings {
			fmt.Fprintf(&b, "  %s %-12s %s\n", f.Level.mark(), f.What, f.Text)
			if f.Fix != "" {
				fmt.Fprintf(&b, "    → %s\n", f.Fix)
			}
		}
	}
	if r.Failed() {
		b.WriteString("\nverdict: ✗ something above stops the hook's messages from reaching a monitor; fix the ✗ lines\n")
	} else if w := r.deliveryWarnings(); len(w) > 0 {
		// "✓" right under "! monitor none" read as a contradiction.
		fmt.Fprintf(&b, "\nverdict: ! nothing above blocks the hook's messages, but see the ! %s line%s: no monitor listens where the hook connects yet\n",
			strings.Join(w, " and "), map[bool]string{true: "", false: "s"}[len(w) == 1])
	} else {
		b.WriteString("\nverdict: ✓ nothing above stops the hook's messages from reaching a monitor\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Options says what to check. Every field has a working zero value except
// Python, which is skipped when "".
type Options struct {
	// Socket is the monitor's path as --socket gives it; "" uses the default.
	Socket string
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// UID is the user's uid, whose directories and sockets are checked.
	UID int
	// Python is the interpreter to ask about torch, CUDA and the hook.
	Python string
	// NVML returns NVML's status line and whether NVML works.
	NVML func() (status string, ok bool)
	// Protocol is the protocol version the monitor speaks.
	Protocol int
	// Elsewhere are the other paths a job started with another environment
	// would use; nil means the /tmp fallback and /run/user/UID's.
	Elsewhere []string
}

// Run performs every check and returns the report.
func Run(ctx context.Context, o Options) Report {
	var r Report
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	monitorPath, sec := checkMonitor(o)
	r.Sections = append(r.Sections, sec)
	if o.Python != "" {
		r.Sections = append(r.Sections, checkPython(ctx, o, monitorPath))
	}
	if o.NVML != nil {
		nv := Section{Title: "NVML (the driver's view of GPU memory)"}
		status, ok := o.NVML()
		if ok {
			nv.add(OK, "nvml", status, "")
		} else {
			nv.add(Warn, "nvml", status, "the monitor still shows the hook's numbers; the NVML line and per-process memory stay empty")
		}
		r.Sections = append(r.Sections, nv)
	}
	return r
}
