package session

import (
	"testing"

	"github.com/vramscope/vramscope/ipc"
)

// micro adds one phase with the backward passes finished before it.
func (f *feed) micro(name string, step, micro int) {
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Micro: micro, Edge: ipc.EdgeBegin})
	f.t += 0.01
	f.add(&ipc.Message{Type: ipc.TypePhase, Name: name, Step: step, Micro: micro, Edge: ipc.EdgeEnd})
}

// A step's micro-steps are its backward passes, whether zero_grad opens
// the step (a plain loop: 0 passes before it) or closes it after the
// update (the HF Trainer's model.zero_grad(): 4 before it).
func TestZeroGradIsNoMicroStep(t *testing.T) {
	for _, trailing := range []bool{false, true} {
		f := newFeed(1, "accum")
		for step := 0; step < 2; step++ {
			if !trailing {
				f.micro("zero_grad", step, 0)
			}
			for k := 0; k < 4; k++ {
				f.micro("forward", step, k)
				f.micro("loss", step, k)
				f.micro("backward", step, k)
			}
			f.micro("step", step, 4)
			if trailing {
				f.micro("zero_grad", step, 4)
			}
		}
		s := New()
		s.ApplyAll(f.evs)
		for _, st := range s.Processes()[0].Steps() {
			if st.Micro != 4 {
				t.Errorf("zero_grad trailing %v: step %d has micro %d, want 4", trailing, st.Index, st.Micro)
			}
		}
	}
}
