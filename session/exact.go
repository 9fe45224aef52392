package session

import (
	"fmt"
	"time"
)

// How a step's peak is known (docs/diagnosis.md, "Exact and inferred
// peaks").

// Exactness says how a peak figure is known.
type Exactness uint8

// Exactness values.
const (
	// Bound: the largest value seen; the true peak may be higher.
	Bound Exactness = iota
	// Exact: the allocator's own peak counter over the step (every phase
	// exact, a plain step's read, or the largest value seen equals the
	// counter at the step's end).
	Exact
	// Inferred: the step repeats an exact step (every phase ended at the
	// same bytes, or the hook found it the same within noise) and takes
	// its peak.
	Inferred
)

// String is "exact", "inferred" or "bound", as the report JSON writes it.
func (e Exactness) String() string {
	switch e {
	case Exact:
		return "exact"
	case Inferred:
		return "inferred"
	}
	return "bound"
}

// MarshalText writes String.
func (e Exactness) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads String's words back, so a program that reads the
// report JSON gets the same values.
func (e *Exactness) UnmarshalText(b []byte) error {
	switch string(b) {
	case "exact":
		*e = Exact
	case "inferred":
		*e = Inferred
	case "bound":
		*e = Bound
	default:
		return fmt.Errorf("exactness %q: neither exact, inferred nor bound", b)
	}
	return nil
}

// Stated reports whether a figure so known may be stated as a value: an
// exact or inferred one; a bound is stated as "≥ X, not exact".
func (e Exactness) Stated() bool { return e != Bound }

// sameTries bounds how many exact steps a step is compared with (newest
// first), so a table of exact steps costs little per phase end.
const sameTries = 64

// settle decides how the step's peak is known and sets PeakAllocated:
// the exact figure, an exact step's that this one repeats, or the largest
// value seen (a lower bound).
func (p *Process) settle(st *Step) {
	exactHook := p.exactPeaks()
	st.PeakAllocated, st.Peak, st.SameAs, st.Within = st.Bound, Bound, -1, 0
	switch {
	case st.plain.Known():
		// A plain step's one read: the whole step's peak since the previous
		// step's last read (exact unless a message was lost in between).
		st.PeakAllocated = st.plain.Max(st.Bound).Max(st.inner)
		if !st.gap {
			st.Peak = Exact
		}
		if k := st.hookSame; k >= 0 {
			if ref := p.StepRow(k); ref != nil && ref.Peak == Exact {
				st.SameAs = k
				st.Within = max(absBytes(ref.PeakAllocated-st.PeakAllocated), absBytes(ref.Held-st.Held))
			}
		}
		return
	case !st.Bound.Known():
		return
	case st.readsExact(exactHook) && !(exactHook && st.gap):
		st.Peak = Exact
		return
	case exactHook && !st.gap && st.closedByRead():
		// Each read's peak covers the time since the read before it, so
		// reads up to the step's last phase end cover the whole step, a
		// phase without a read of its own (zero_grad after step 2 on a
		// breakdown step) included.
		st.Peak = Exact
		return
	}
	// Without resets the counter never falls: at the step's end it bounds
	// the step's peak from above. Seen = counter: the peak is exact.
	upper := Unknown
	if !exactHook {
		upper = st.counterAtEnd()
		if upper.Known() && upper == st.Bound {
			st.Peak = Exact
			return
		}
	}
	if ref := p.repeated(st); ref != nil && ref.PeakAllocated >= st.Bound && (!upper.Known() || ref.PeakAllocated <= upper) {
		st.PeakAllocated, st.Peak, st.SameAs = ref.PeakAllocated, Inferred, ref.Index
		st.PeakReserved = st.PeakReserved.Max(ref.PeakReserved)
		for i := range st.Phases {
			c := &st.Phases[i]
			rc := ref.Cell(c.Name)
			if c.User || c.Exact || rc == nil || !rc.Exact || rc.PeakAllocated < c.PeakAllocated {
				continue
			}
			c.PeakAllocated, c.Inferred = rc.PeakAllocated, true
		}
	}
}

// Plain reports whether the hook read the step once (protocol span
// "step"): its peak and held memory are exact, its phases were not read.
func (st *Step) Plain() bool { return st.plain.Known() }

// Moved reports whether a plain step moved beyond noise from the hook's
// last breakdown step (the hook sent no same_as), so the hook reads the
// next step by phase. A plain step the hook found the same is not moved,
// also when the step it names has left the table (SameAs is then -1).
func (st *Step) Moved() bool { return st.plain.Known() && st.hookSame < 0 }

// exactPeaks reports whether the hook resets the peak counters at each
// read (hello.hook.exact_peaks, or the older reset_peaks).
func (p *Process) exactPeaks() bool {
	h := p.Hello.Hook
	return h != nil && (h.ExactPeaks || h.ResetPeaks)
}

// readsExact reports whether the step's reads give its whole peak: every
// automatic phase that was read has an exact peak (and one was), and each
// phase left unread is covered. A zero_grad only frees memory, so its peak
// is the figure before it; with an exact-peaks hook any other unread phase
// is inside the interval of a later read of the step (each read's
// max_allocated is the peak since the one before).
func (st *Step) readsExact(exactHook bool) bool {
	n := 0
	var last time.Time
	for i := range st.Phases {
		c := &st.Phases[i]
		if c.User || !c.Read {
			continue
		}
		if !c.Exact || !c.PeakAllocated.Known() {
			return false
		}
		n++
		if c.End.After(last) {
			last = c.End
		}
	}
	if n == 0 {
		return false
	}
	for i := range st.Phases {
		c := &st.Phases[i]
		if c.User || c.Read || c.Name == "zero_grad" {
			continue
		}
		if !exactHook || c.End.After(last) {
			return false
		}
	}
	return true
}

// closedByRead reports whether the step's last automatic phase to end
// carried a read at its end.
func (st *Step) closedByRead() bool {
	var last *Cell
	for i := range st.Phases {
		if c := &st.Phases[i]; !c.User && (last == nil || !c.End.Before(last.End)) {
			last = c
		}
	}
	return last != nil && last.AllocatedEnd.Known()
}

// counterAtEnd is max_allocated at the step's last automatic read,
// Unknown when none.
func (st *Step) counterAtEnd() Bytes {
	v := Unknown
	var at = st.Start
	for i := range st.Phases {
		c := &st.Phases[i]
		if !c.User && c.MaxAllocatedEnd.Known() && !c.End.Before(at) {
			v, at = c.MaxAllocatedEnd, c.End
		}
	}
	return v
}

// repeated finds the newest exact step before st whose automatic phases
// are the same, in the same order, and ended at the same allocated bytes:
// the same work on the same held memory, so the same peak.
func (p *Process) repeated(st *Step) *Step {
	tries := 0
	for k := len(p.steps) - 1; k >= 0 && tries < sameTries; k-- {
		ref := p.steps[k]
		if ref.Index >= st.Index || ref.Peak != Exact {
			continue
		}
		tries++
		if sameEnds(ref, st) {
			return ref
		}
	}
	return nil
}

// sameEnds compares the automatic phases' names and allocated ends.
func sameEnds(a, b *Step) bool {
	var i, j int
	for {
		for i < len(a.Phases) && a.Phases[i].User {
			i++
		}
		for j < len(b.Phases) && b.Phases[j].User {
			j++
		}
		if i == len(a.Phases) || j == len(b.Phases) {
			return i == len(a.Phases) && j == len(b.Phases) && i > 0
		}
		ca, cb := &a.Phases[i], &b.Phases[j]
		if ca.Name != cb.Name || !ca.AllocatedEnd.Known() || ca.AllocatedEnd != cb.AllocatedEnd {
			return false
		}
		i, j = i+1, j+1
	}
}

// stepRow is the table row of a step, nil when it left the table.
func (p *Process) StepRow(index int) *Step {
	for k := len(p.steps) - 1; k >= 0; k-- {
		if p.steps[k].Index == index {
			return p.steps[k]
		}
	}
	return nil
}

func absBytes(b Bytes) Bytes {
	if b < 0 {
		return -b
	}
	return b
}
