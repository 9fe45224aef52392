package report

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// A plain step's line says what the hook compared: a step that ran every
// phase is "same phases" as its breakdown step; one that skipped its
// update ran one phase fewer, so only its peak and held memory match.
func TestPlainStepSummaryNamesWhatMatched(t *testing.T) {
	base := Step{PeakAllocated: 3934 * session.MiB, Peak: session.Exact, Held: 1899 * session.MiB,
		Plain: true, SameAs: 1}
	skipped := base
	skipped.Skipped = true
	for _, c := range []struct {
		st   Step
		want string
	}{
		{base, "same phases as step 1 (exact to the byte): step peak 3934 MiB · held 1899 MiB"},
		{skipped, "same peak and held memory as step 1 (exact to the byte): step peak 3934 MiB · held 1899 MiB · optimizer step skipped"},
	} {
		if got := c.st.summary(); !strings.HasPrefix(got, c.want) {
			t.Errorf("summary %q, want %q", got, c.want)
		}
	}
}
