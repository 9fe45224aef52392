package session

import (
	"time"
	"unsafe"

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

// footprint estimates the bytes c holds: itself, its holders, capture sites
// and modules with their names (at most 32 of each: O(1) a census).
func (c *Census) footprint() int {
	n := int(unsafe.Sizeof(*c)) + len(c.Reason) + len(c.Device)
	for i := range c.Holders {
		h := &c.Holders[i]
		n += int(unsafe.Sizeof(*h)) + len(h.Kind) + len(h.Name) + len(h.Container) + len(h.Function) + len(h.File) + len(h.Dtype)
	}
	if a := c.Allocator; a != nil {
		n += int(unsafe.Sizeof(*a))
	}
	if k := c.Capture; k != nil {
		n += int(unsafe.Sizeof(*k)) + len(k.File)
		for _, st := range k.Sites {
			n += int(unsafe.Sizeof(st)) + len(st.File) + len(st.Function)
		}
	}
	if sm := c.SavedByModule; sm != nil {
		n += int(unsafe.Sizeof(*sm))
		for _, m := range sm.Modules {
			n += int(unsafe.Sizeof(m))
			if m.Module != nil {
				n += len(*m.Module)
			}
		}
	}
	return n
}
