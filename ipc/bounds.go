package ipc

import (
	"fmt"
)

// Ranges for values that are finite and non-negative yet impossible, which
// would otherwise overflow the monitor's arithmetic: a time.Duration holds
// ±292 years, so a t of 1e10 s made a session "9,223,372,036 s" long.
const (
	// maxMono bounds t and clock.mono: time.monotonic() counts from boot,
	// and 1e9 s is 31 years of uptime.
	maxMono = 1e9
	// maxWall bounds clock.wall: 4e9 s after 1970 is the year 2096. With
	// maxMono it keeps every mapped time within a time.Duration of another.
	maxWall = 4e9
	// maxSeqJump bounds how far one connection's seq may jump ahead of its
	// previous message: 2^40 is 127 days of 100,000 dropped messages a
	// second. Beyond it the seq is a lie, and believing it would make every
	// later message of the session a "duplicate".
	maxSeqJump = 1 << 40
)

// validateRanges rejects values that pass the type checks but cannot be
// real (docs/protocol.md, "Ranges").
func (m *Message) validateRanges() error {
	if m.Seq >= maxInteger {
		return fmt.Errorf("field seq: larger than 2^53")
	}
	if m.T > maxMono {
		return fmt.Errorf("field t: %g s is beyond any monotonic clock (limit %g)", m.T, float64(maxMono))
	}
	if c := m.Clock; c != nil {
		if c.Mono > maxMono {
			return fmt.Errorf("field clock.mono: %g s is beyond any monotonic clock (limit %g)", c.Mono, float64(maxMono))
		}
		if c.Wall > maxWall {
			return fmt.Errorf("field clock.wall: %g is after the year 2096 (limit %g)", c.Wall, float64(maxWall))
		}
	}
	if m.Step >= maxInteger || m.Micro >= maxInteger {
		return fmt.Errorf("field step or micro: larger than 2^53")
	}
	if h := m.Hook; h != nil && h.SampleHz > 1e6 {
		return fmt.Errorf("field hook.sample_hz: %g is more than 1e6", h.SampleHz)
	}
	return nil
}

// seqCheck follows one connection's seq: a message may not jump more than
// maxSeqJump past the connection's previous one. A hello starts over.
type seqCheck struct{ last uint64 }

func (c *seqCheck) check(m *Message) error {
	if m.Type == TypeHello {
		c.last = m.Seq
		return nil
	}
	if m.Seq > c.last && m.Seq-c.last > maxSeqJump {
		return fmt.Errorf("field seq: jumps from %d to %d on this connection (at most 2^40 at once)", c.last, m.Seq)
	}
	if m.Seq > c.last {
		c.last = m.Seq
	}
	return nil
}
