package report

import (
	"bufio"
	"bytes"
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

// A process that ended cleanly after a backward with no update: the last
// step is kept, left out of the totals, and the report says why.
func TestAStepThatNeverUpdatedIsNamedUnfinished(t *testing.T) {
	s := newSynth(500*sMiB, true)
	for range 6 {
		s.train(1000*sMiB, 64)
	}
	base := s.cur
	s.phase("zero_grad", base, base-s.weights, base, 0, false)
	s.phase("forward", base-s.weights, base+500*sMiB, base+500*sMiB, 64, false)
	s.phase("loss", base+500*sMiB, base+500*sMiB, base+500*sMiB, 0, false)
	s.phase("backward", base+500*sMiB, base, base+1000*sMiB, 0, false)
	s.goodbye("exit")
	p := s.report(t)
	if p.UnfinishedStep != 6 || p.PartialStep != -1 || p.StepsTotal != 6 {
		t.Fatalf("unfinished %d partial %d steps %d, want 6, -1, 6", p.UnfinishedStep, p.PartialStep, p.StepsTotal)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	p.writeText(w)
	w.Flush()
	if !strings.Contains(b.String(), "step 6 did not reach an update before the process ended") {
		t.Errorf("no line for the unfinished step:\n%s", b.String())
	}
	if s := p.Steps[len(p.Steps)-1]; s.Step != 6 || s.Skipped {
		t.Errorf("last row %+v: want step 6, not marked skipped", s)
	}
}
