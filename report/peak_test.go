package report

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// The report's totals and the diagnosis place the session's allocated
// peak in the same step and phase, because both read
// diagnose.SessionPeakOf; that holds too when the peak step has left the
// store's bounded per-step summaries.
func TestTotalsAndDiagnosisShareTheSessionPeak(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		steps    int
		bump     int // a step whose memory rises by 1 GiB, -1 for none
	}{
		{"warmup", 30, -1},
		{"steady", 30, -1},
		{"leak", 30, -1},
		{"steady", 200, 100}, // the peak is in the middle the summaries drop
	} {
		msgs := generate(t, tc.scenario, tc.steps)
		for i := range msgs {
			if m := &msgs[i]; m.Mem != nil && m.Step == tc.bump && m.Type != ipc.TypeHello {
				mem := *m.Mem
				mem.Allocated += 1 << 30
				mem.MaxAllocated += 1 << 30
				mem.Reserved += 1 << 30
				mem.MaxReserved += 1 << 30
				m.Mem = &mem
			}
		}
		p := Build(storeWith(msgs, false, session.WithMaxStepPeaks(20), session.WithMaxSteps(20))).Processes[0]
		tot, pk := p.Totals, p.Diagnosis.Peak
		if tot.PeakAllocatedStep < 0 || tot.PeakAllocatedStep != pk.Step || tot.PeakAllocated != pk.Allocated || tot.PeakAllocatedPhase != pk.Phase {
			t.Errorf("%s/%d: totals peak %v at step %d %q, diagnosis %v at step %d %q", tc.scenario, tc.steps,
				tot.PeakAllocated, tot.PeakAllocatedStep, tot.PeakAllocatedPhase, pk.Allocated, pk.Step, pk.Phase)
		}
		if tc.bump >= 0 && tot.PeakAllocatedStep != tc.bump {
			t.Errorf("%s/%d: peak at step %d, want the bumped step %d", tc.scenario, tc.steps, tot.PeakAllocatedStep, tc.bump)
		}
	}
}
