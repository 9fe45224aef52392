package tui

import (
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// busyProcs and busyHour size BenchmarkFrameBusy: 256 ranks, an hour each
// of a step a second (five phases, begin and end, each end with the
// allocator's figures), applied through Update in batches as the live
// view receives them.
const (
	busyProcs = 256
	busyHour  = time.Hour
)

// BenchmarkFrameBusy is one frame at 200×60 of a job of 256 ranks with an
// hour of data: the chart of the focused rank at the default one-minute
// window and the ranks line, which reads every rank's step peaks. Setting
// it up feeds 9.2 million messages (about a minute on two busy cores):
//
//	go test ./tui -run XXX -bench FrameBusy -benchtime 20x
func BenchmarkFrameBusy(b *testing.B) {
	m := busyModel(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.render()
	}
}

// BenchmarkFrameBusyWhole is that frame zoomed out to the whole hour.
func BenchmarkFrameBusyWhole(b *testing.B) {
	m := press(b, busyModel(b), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.render()
	}
}

var busyModelOnce *Model

func busyModel(b *testing.B) Model {
	if busyModelOnce != nil {
		return *busyModelOnce
	}
	wall0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	end := wall0.Add(busyHour)
	m := New(WithSource(&fakeSource{}), WithClock(func() time.Time { return end }), WithDevice("simulated", simDevices()))
	m, _ = update(b, m, tea.WindowSizeMsg{Width: 200, Height: 60})
	var batch []session.Event
	flush := func() {
		m, _ = update(b, m, batchMsg(batch))
		batch = nil
	}
	rank := make([]int, busyProcs)
	for i := range busyProcs {
		rank[i] = i
		batch = append(batch, session.Event{At: wall0, Conn: uint64(i + 1), Msg: &ipc.Message{
			V: 1, Type: ipc.TypeHello, Session: fmt.Sprintf("rank%03d", i), PID: 1000 + i, Host: "h",
			Argv: []string{"train.py"}, Rank: &rank[i], WorldSize: &rank[busyProcs-1], Torch: "2.3.1",
			CUDA:  &ipc.CUDADevice{Index: i % 8, UUID: fmt.Sprintf("GPU-%d", i%8), Name: "H100", Total: 80 << 30},
			Clock: &ipc.Clock{Mono: 0, Wall: float64(wall0.UnixNano()) / 1e9},
			Hook:  &ipc.HookConfig{Version: "0.2.0", SampleHz: 50, ResetPeaks: true},
		}})
	}
	phases := [...]string{"zero_grad", "forward", "loss", "backward", "step"}
	const gap = 100 * time.Millisecond // ten messages a step, a step a second
	n := int(busyHour / gap)
	for k := range n {
		s, e := k/10, k%10
		edge := ipc.EdgeBegin
		if e%2 == 1 {
			edge = ipc.EdgeEnd
		}
		for i := range busyProcs {
			at := time.Duration(k+1)*gap + time.Duration(i)*gap/busyProcs
			msg := &ipc.Message{V: 1, Type: ipc.TypePhase, Seq: uint64(k + 1), T: at.Seconds(),
				Name: phases[e/2], Step: s, Edge: edge}
			if edge == ipc.EdgeEnd {
				alloc := int64(4<<30) + int64(e/2)<<27 + int64(s%7)<<20 + int64(s)<<12
				msg.Mem = &ipc.Mem{Allocated: alloc, MaxAllocated: alloc + 1<<28, Reserved: 7 << 30, MaxReserved: 7 << 30}
			}
			batch = append(batch, session.Event{At: wall0.Add(at), Conn: uint64(i + 1), Msg: msg})
		}
		if len(batch) >= 4096 {
			flush()
		}
	}
	flush()
	m, _ = update(b, m, frameTick(time.Time{}))
	if got := len(m.store.Processes()); got != busyProcs {
		b.Fatalf("%d processes, want %d", got, busyProcs)
	}
	busyModelOnce = &m
	return m
}
