package diagnose

import (
	"fmt"

	"github.com/vramscope/vramscope/session"
)

// Known says how a figure that can be a lower bound is known: exact, or
// inferred from step SameAs (it repeats that exact step), or a bound (the
// largest value seen; the truth may be higher). Text states a bound as
// "≥ X MiB, not exact", never as the value.
type Known struct {
	Is     session.Exactness `json:"is"`
	SameAs int               `json:"same_as"` // -1 unless inferred
	// Within is how far a step the hook found "the same" is from the step
	// it repeats (0: to the byte), null when SameAs is -1.
	Within session.Bytes `json:"within"`
}

// unknownKnown is the value of a figure with no source: a bound of nothing.
var unknownKnown = Known{Is: session.Bound, SameAs: -1, Within: session.Unknown}

// knownOf is how the largest allocated peak of pk is known: exact when every
// step's is; inferred (from the step the largest one repeats) when every
// step's is exact or inferred; a bound when any step's is a bound (that
// step may have peaked higher than what was seen).
func knownOf(pk []session.StepPeak) Known {
	k := Known{Is: session.Exact, SameAs: -1}
	if len(pk) == 0 {
		return unknownKnown
	}
	top := session.Unknown
	for i := range pk {
		sp := &pk[i]
		switch sp.Peak {
		case session.Bound:
			k.Is = session.Bound
		case session.Inferred:
			if k.Is == session.Exact {
				k.Is = session.Inferred
			}
		}
		if sp.PeakAllocated > top {
			top = sp.PeakAllocated
			k.SameAs, k.Within = sp.SameAs, sp.Within
		}
	}
	if k.Is != session.Inferred {
		k.SameAs = -1
	}
	if k.SameAs < 0 {
		k.Within = session.Unknown
	}
	if k.Is == session.Inferred && k.SameAs < 0 {
		for i := range pk { // the largest was exact: name a step it repeats
			if pk[i].SameAs >= 0 {
				k.SameAs = pk[i].SameAs
				break
			}
		}
	}
	return k
}

// MiB writes a figure as it may be stated: "4309 MiB" when exact or
// inferred, "≥ 3393 MiB (not exact)" when a bound.
func (k Known) MiB(b session.Bytes) string {
	if !b.Known() {
		return "– MiB"
	}
	if k.Is == session.Bound {
		return "≥ " + b.MiBString() + " MiB (not exact)"
	}
	return b.MiBString() + " MiB"
}

// Note is how an inferred figure was found, "" for an exact one or a bound:
// "inferred: same as step 1, every phase ended at the same bytes".
// A bound's MiB says "(not exact)" already.
func (k Known) Note() string {
	if k.Is != session.Inferred || k.SameAs < 0 {
		return ""
	}
	return fmt.Sprintf("inferred: same as step %d, every phase ended at the same bytes", k.SameAs)
}
