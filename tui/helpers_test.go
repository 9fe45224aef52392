package tui

import (
	"context"
	"io"
	"math"
	"os"
	"sort"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// demoEvents turns the demo generator's messages for ranks ranks of a
// scenario into the events a live monitor would see, time-ordered, with a
// simulated NVML sample (process list included) every 200 ms.
func demoEvents(tb testing.TB, scenario string, steps, ranks int) []session.Event {
	tb.Helper()
	sc, err := demo.Lookup(scenario)
	if err != nil {
		tb.Fatal(err)
	}
	var evs []session.Event
	for r := 0; r < ranks; r++ {
		msgs := demo.Generate(sc, demo.Config{Steps: steps, Rank: r, WorldSize: ranks})
		clock := msgs[0].Clock
		for i := range msgs {
			at := wallOf(clock, msgs[i].T)
			evs = append(evs, session.Event{At: at, Conn: uint64(r + 1), Msg: &msgs[i]})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At.Before(evs[j].At) })
	return withNVML(evs)
}

func wallOf(c *ipc.Clock, t float64) time.Time {
	s := c.Wall + (t - c.Mono)
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
}

// withNVML interleaves samples of probe's simulated sampler, fed with the
// ranks' reserved memory, every 200 ms.
func withNVML(evs []session.Event) []session.Event {
	if len(evs) == 0 {
		return evs
	}
	var now time.Time
	sim := probe.NewSimulated(probe.WithSimClock(func() time.Time { return now }))
	out := make([]session.Event, 0, len(evs)+len(evs)/40)
	next := evs[0].At.Add(200 * time.Millisecond)
	var buf []probe.Sample
	for _, ev := range evs {
		for !ev.At.Before(next) {
			now = next
			buf, _ = sim.Sample(buf, true)
			smp := buf[0].Clone()
			out = append(out, session.Event{At: now, GPU: &smp})
			next = next.Add(200 * time.Millisecond)
		}
		if m := ev.Msg; m != nil && m.Mem != nil {
			sim.OnMem(int(ev.Conn)-1, ev.At, m.Mem.Reserved)
		}
		if m := ev.Msg; m != nil && m.Type == ipc.TypeGoodbye {
			sim.OnExit(int(ev.Conn) - 1)
		}
		out = append(out, ev)
	}
	return out
}

// fixedClock is the injected wall clock of the goldens.
func fixedClock(evs []session.Event) func() time.Time {
	t := evs[len(evs)-1].At
	return func() time.Time { return t }
}

// update sends msg and returns the resulting Model.
func update(tb testing.TB, m Model, msg tea.Msg) (Model, tea.Cmd) {
	tb.Helper()
	next, cmd := m.Update(msg)
	return next.(Model), cmd
}

// keyMsg builds the key message of a key name as bubbletea reports it.
func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// press sends a sequence of keys.
func press(tb testing.TB, m Model, keys ...string) Model {
	tb.Helper()
	for _, k := range keys {
		m, _ = update(tb, m, keyMsg(k))
	}
	return m
}

// fakeSource hands out fixed batches, then io.EOF.
type fakeSource struct{ batches [][]session.Event }

func (f *fakeSource) Next(ctx context.Context) ([]session.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(f.batches) == 0 {
		return nil, io.EOF
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	return b, nil
}

// batches cuts events into batches of n.
func batches(evs []session.Event, n int) [][]session.Event {
	var out [][]session.Event
	for len(evs) > 0 {
		k := min(n, len(evs))
		out = append(out, evs[:k])
		evs = evs[k:]
	}
	return out
}

// live builds a model of demo events applied through a fake Source, batch
// by batch, the way the program's command loop does.
func live(tb testing.TB, evs []session.Event, w, h int, opts ...Option) Model {
	tb.Helper()
	src := &fakeSource{batches: batches(evs, 500)}
	opts = append([]Option{WithSource(src), WithClock(fixedClock(evs)), WithDevice("simulated", simDevices())}, opts...)
	m := New(opts...)
	m, _ = update(tb, m, tea.WindowSizeMsg{Width: w, Height: h})
	for {
		// Update re-issues waitBatch batched with its ticks: call it here.
		msg := waitBatch(m.ctx, src)()
		m, _ = update(tb, m, msg)
		if _, ok := msg.(batchMsg); !ok {
			break
		}
	}
	m, _ = update(tb, m, frameTick(time.Time{}))
	return m
}

func simDevices() []probe.Device {
	devs, _ := probe.NewSimulated().Devices()
	return devs
}

// TestMain renders without colour, so views and goldens are plain text.
func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}
