package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// The header says how long NVML reads take, and when the driver does not
// show per-process memory.
func TestHeaderShowsNVMLReadTimeAndVisibility(t *testing.T) {
	var evs []session.Event
	for _, ev := range demoEvents(t, "warmup", 3, 1) {
		if ev.Msg == nil || ev.Msg.Type != "goodbye" { // still connected
			evs = append(evs, ev)
		}
	}
	last := evs[len(evs)-1].At
	took := func(d time.Duration, procs []probe.Process) session.Event {
		last = last.Add(100 * time.Millisecond)
		return session.Event{At: last, GPU: &probe.Sample{At: last, Device: probe.SimulatedUUID,
			Used: 6 << 30, Total: probe.SimulatedTotal, Took: d, Processes: procs}}
	}
	visible := append(evs, took(3*time.Millisecond, []probe.Process{{PID: 4242, Used: 5 << 30}}), took(800*time.Microsecond, nil))
	v := live(t, visible, 160, 48).View()
	if !strings.Contains(v, "NVML read 0.8 ms (max 3.0 ms)") {
		t.Errorf("header lacks the NVML read time:\n%s", firstLines(v, 2))
	}
	if strings.Contains(v, probe.NotVisibleNote) {
		t.Errorf("per-process memory is visible, but the header says not:\n%s", firstLines(v, 2))
	}
	// A container without the host's PID namespace: the list is empty.
	hidden := append(evs, took(time.Millisecond, []probe.Process{}))
	if v := live(t, hidden, 200, 48).View(); !strings.Contains(v, probe.NotVisibleNote) {
		t.Errorf("header lacks %q:\n%s", probe.NotVisibleNote, firstLines(v, 2))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// `vramscope run`'s title is its command line: at 80×24 a long one is cut,
// not the connection state and the clock after it.
func TestLongRunTitleKeepsTheStateAndClock(t *testing.T) {
	evs := demoEvents(t, "warmup", 3, 1)
	evs = evs[:len(evs)-1] // still connected
	title := "run: python examples/train_language_model.py --model gpt2 --batch-size 8 --epochs 3"
	top := firstLines(live(t, evs, 80, 24, WithTitle(title), WithOutputLog("vramscope-run-20261125-233000.log")).View(), 1)
	for _, want := range []string{"run: python", "● connected", "⏱ 0:01"} {
		if !strings.Contains(top, want) {
			t.Errorf("the header lacks %q:\n%s", want, top)
		}
	}
	if w := width(top); w > 80 {
		t.Errorf("the header is %d cells wide", w)
	}
}
