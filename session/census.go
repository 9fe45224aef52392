package session

import (
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// MaxCensuses is how many censuses a process keeps: the first two and the
// newest, a census from the middle dropped first (a census line is at most
// 64 KiB: half a MiB a process at most).
const MaxCensuses = 8

// Census is one census of the live tensors the hook took (docs/census.md):
// when it arrived, at which step, and what the hook sent.
type Census struct {
	At   time.Time
	Step int
	ipc.Census
}

func (p *Process) census(at time.Time, m *ipc.Message) {
	if len(p.Censuses) >= MaxCensuses {
		p.Censuses = append(p.Censuses[:2], p.Censuses[3:]...)
	}
	p.Censuses = append(p.Censuses, Census{At: at, Step: m.Step, Census: *m.Census})
}
