package session

import (
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// TestSkewedHookClockKeepsTheSpanTrue: one hook whose hello says +1 h, or
// whose t jumps back 500 s, turned a 3-second recording into a
// 4,101-second session that started 8 minutes before the recording did,
// and replay was paced for 68 minutes. Each hook's
// clock is now bounded against when its messages arrived, the skew is
// counted and said once, and the session spans the 3 s it ran.
func TestSkewedHookClockKeepsTheSpanTrue(t *testing.T) {
	recv0 := time.Unix(1763794800, 0)
	var evs []Event
	add := func(conn uint64, dt float64, m *ipc.Message) {
		evs = append(evs, Event{At: recv0.Add(time.Duration(dt * float64(time.Second))), Conn: conn, Msg: m})
	}
	hello := func(session string, wall float64) *ipc.Message {
		return &ipc.Message{V: 1, Type: ipc.TypeHello, T: 50, Session: session, PID: 1,
			Clock: &ipc.Clock{Mono: 50, Wall: wall}}
	}
	sample := func(seq uint64, t float64) *ipc.Message {
		return &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: seq, T: t, Mem: &ipc.Mem{Allocated: 1, MaxAllocated: 1, Reserved: 2, MaxReserved: 2}}
	}
	wall := float64(recv0.Unix())
	add(1, 0, hello("honest", wall))
	add(2, 0, hello("ahead", wall+3600))
	add(3, 0, hello("jumps", wall))
	for i := 1; i <= 30; i++ {
		dt := float64(i) / 10
		add(1, dt, sample(uint64(i), 50+dt))
		add(2, dt, sample(uint64(i), 50+dt))
		tj := 50 + dt
		if i > 15 {
			tj -= 500 // the monotonic clock goes back 500 s
		}
		add(3, dt, sample(uint64(i), tj))
	}
	s := New()
	s.ApplyAll(evs)
	if span := s.Last().Sub(s.Start()); span < 2900*time.Millisecond || span > 3100*time.Millisecond {
		t.Errorf("session spans %v (%v to %v), want 3 s", span, s.Start(), s.Last())
	}
	if !s.Start().Equal(recv0) {
		t.Errorf("session starts at %v, the recording at %v", s.Start(), recv0)
	}
	for _, key := range []string{"ahead", "jumps"} {
		p := s.Process(key)
		if p.ClockSkews == 0 || p.MaxClockSkew < 499*time.Second {
			t.Errorf("%s: %d skews, largest %v", key, p.ClockSkews, p.MaxClockSkew)
		}
		if d := p.Last.Sub(p.First); d < 2900*time.Millisecond || d > 3100*time.Millisecond {
			t.Errorf("%s spans %v", key, d)
		}
	}
	if p := s.Process("honest"); p.ClockSkews != 0 {
		t.Errorf("the honest hook has %d skews", p.ClockSkews)
	}
	said := 0
	for _, n := range s.Notes {
		if strings.Contains(n.Text, "clock is off") {
			said++
		}
	}
	if said != 2 {
		t.Errorf("%d notes say a clock is off, want 2", said)
	}
	paced := append([]Event(nil), evs...)
	pace(paced)
	if d := paced[len(paced)-1].At.Sub(paced[0].At); d > 3100*time.Millisecond {
		t.Errorf("replay is paced over %v, want 3 s", d)
	}
}
