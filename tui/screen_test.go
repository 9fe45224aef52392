package tui

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/vramscope/vramscope/session"
)

// Fixtures. The H100 recordings come from ../shared/recordings/h100
// (README there): live.jsonl.gz is two seed001.py processes on one GPU,
// the second joining after ~10 s and outliving the first; clients.jsonl.gz
// is 21 hook sessions one after another, each ended by a goodbye. The CPU
// recording is testdata/recordings/cpu_torch113.py run with Debian's
// torch 1.13 (CPU only) under `vramscope record`.
const (
	liveRecording    = "../testdata/h100/live.jsonl.gz"
	clientsRecording = "../testdata/h100/clients.jsonl.gz"
	cpuRecording     = "../testdata/recordings/cpu_torch113.jsonl.gz"
)

// stepModel is a live model with nothing applied yet, sized w × h, fed
// by feed one batch (and one frame) at a time.
func stepModel(t *testing.T, evs []session.Event, w, h int) Model {
	t.Helper()
	m := New(WithSource(&fakeSource{}), WithClock(fixedClock(evs)))
	m, _ = update(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

// feed applies a batch and draws the next frame, as the program does.
func feed(t *testing.T, m Model, evs []session.Event) Model {
	t.Helper()
	m, _ = update(t, m, batchMsg(evs))
	m, _ = update(t, m, frameTick(time.Time{}))
	return m
}

// indexWhere is the index of the n-th (from 0) event that ok accepts.
func indexWhere(t *testing.T, evs []session.Event, n int, ok func(session.Event) bool) int {
	t.Helper()
	for i, ev := range evs {
		if ok(ev) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("no event %d of that kind", n)
	return -1
}

func isHello(ev session.Event) bool { return ev.HelloSession() != "" }

func isGoodbyeOn(conn uint64) func(session.Event) bool {
	return func(ev session.Event) bool { return ev.IsGoodbye() && ev.Conn == conn }
}

// runningOnly drops the goodbyes: every process is still running.
func runningOnly(evs []session.Event) []session.Event {
	out := make([]session.Event, 0, len(evs))
	for _, ev := range evs {
		if !ev.IsGoodbye() {
			out = append(out, ev)
		}
	}
	return out
}

func headerOf(m Model) string { return firstLines(m.View(), 2) }

// Focus on the real two-process recording: the first process stays on
// screen while it runs, focus moves to the second when it exits, a
// process picked with tab stays even after it exited, and the header
// says exited (goodbye) or disconnected (none).
func TestFocusFollowsTheRunningProcess(t *testing.T) {
	evs := recording(t, liveRecording)
	hello2 := indexWhere(t, evs, 1, isHello)
	bye1 := indexWhere(t, evs, 0, isGoodbyeOn(1))
	bye2 := indexWhere(t, evs, 0, isGoodbyeOn(2))
	m := stepModel(t, evs, 160, 48)
	done := 0
	tests := []struct {
		name    string
		upto    int // feed events up to this index
		keys    []string
		want    []string
		notWant []string
	}{
		{"the first process alone", hello2, nil, []string{"pid 692 (1/1)", "● connected"}, nil},
		{"a second joins: the first stays", bye1, nil, []string{"pid 692 (1/2)", "● connected", "processes peak MiB: [pid 692 "}, nil},
		{"the first exits: focus moves to the running one", bye1 + 2, nil,
			[]string{"pid 728 (2/2)", "● connected", "pid 692 4309 ■ · [pid 728 "}, []string{"disconnected"}},
		{"tab back to the exited one", bye1 + 2, []string{"tab"}, []string{"pid 692 (1/2)", "■ exited"}, []string{"disconnected"}},
		{"it stays while nothing new happens", bye2 - 1, nil, []string{"pid 692 (1/2)", "■ exited"}, nil},
		{"both exited", len(evs), nil, []string{"pid 692 (1/2)", "■ exited"}, nil},
		{"tab to the other", len(evs), []string{"tab"}, []string{"pid 728 (2/2)", "■ exited"}, nil},
	}
	for _, tt := range tests {
		if tt.upto > done {
			m, done = feed(t, m, evs[done:tt.upto]), tt.upto
		}
		m = press(t, m, tt.keys...)
		h := headerOf(m)
		full := m.View()
		for _, w := range tt.want {
			if !strings.Contains(full, w) {
				t.Errorf("%s: the screen lacks %q:\n%s", tt.name, w, h)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(h, w) {
				t.Errorf("%s: the header says %q:\n%s", tt.name, w, h)
			}
		}
	}
}

// A paused view keeps its process: focus moves on resume.
func TestPausedViewKeepsFocus(t *testing.T) {
	evs := recording(t, liveRecording)
	bye1 := indexWhere(t, evs, 0, isGoodbyeOn(1))
	m := feed(t, stepModel(t, evs, 160, 48), evs[:bye1])
	m = press(t, m, "space")
	m = feed(t, m, evs[bye1:bye1+2])
	if m = press(t, m, "down"); !strings.Contains(headerOf(m), "pid 692 (1/2)") {
		t.Errorf("focus moved while paused:\n%s", headerOf(m))
	}
	if m = press(t, m, "space"); !strings.Contains(headerOf(m), "pid 728 (2/2)") {
		t.Errorf("focus did not move on resume:\n%s", headerOf(m))
	}
}

// A process that vanishes without a goodbye reads "disconnected", not
// "exited" (the second process of the recording, its goodbye removed).
func TestDisconnectedWithoutGoodbye(t *testing.T) {
	evs := recording(t, liveRecording)
	bye2 := indexWhere(t, evs, 0, isGoodbyeOn(2))
	evs = append(evs[:bye2:bye2], evs[bye2+1:]...)
	m := stepModel(t, evs, 160, 48)
	m = feed(t, m, evs[:bye2-1]) // the first has exited, the second runs
	m = feed(t, m, evs[bye2-1:])
	if h := headerOf(m); !strings.Contains(h, "pid 728 (2/2)") || !strings.Contains(h, "○ disconnected") {
		t.Errorf("header:\n%s", h)
	}
	if !strings.Contains(m.View(), "pid 692 4309 ■ · [pid 728 1126 ○]") {
		t.Errorf("the processes line does not tell the exit from the drop:\n%s", m.View())
	}
}

// Real sessions one after another (21 in clients.jsonl.gz): each new one
// takes focus, and between them the header says the last one exited.
func TestNewProcessTakesFocus(t *testing.T) {
	evs := recording(t, clientsRecording)
	m := stepModel(t, evs, 120, 30)
	done, n := 0, 0
	for i, ev := range evs {
		if !isHello(ev) {
			continue
		}
		if i > 0 {
			m, done = feed(t, m, evs[done:i]), i
			if n > 0 && !strings.Contains(headerOf(m), "■ exited") {
				t.Fatalf("before hello %d the header does not say exited:\n%s", n, headerOf(m))
			}
		}
		m, done = feed(t, m, evs[done:i+1]), i+1
		n++
		if p := m.process(); p == nil || p.Key != ev.HelloSession() {
			t.Fatalf("hello %d (%s) did not take focus", n, ev.HelloSession())
		}
		if want := "(" + strconv.Itoa(n) + "/" + strconv.Itoa(n) + ")"; !strings.Contains(headerOf(m), want) {
			t.Fatalf("hello %d: header lacks %q:\n%s", n, want, headerOf(m))
		}
	}
	if n != 21 {
		t.Fatalf("%d hellos, want 21", n)
	}
}

// permutedRanks gives the demo's three connections the ranks 2, 0, 1, so
// that they connect in an order that is not the ranks'.
func permutedRanks(evs []session.Event) []session.Event {
	ranks := map[uint64]int{1: 2, 2: 0, 3: 1}
	for _, ev := range evs {
		if isHello(ev) {
			r := ranks[ev.Conn]
			ev.Msg.Rank = &r
		}
	}
	return evs
}

func TestRanksOrderedByRank(t *testing.T) {
	evs := permutedRanks(runningOnly(demoEvents(t, "warmup", 20, 3)))
	first := indexWhere(t, evs, 0, isHello)
	m := stepModel(t, evs, 120, 40)
	m = feed(t, m, evs[:first+1])
	if h := headerOf(m); !strings.Contains(h, "rank 2 · pid 4242 (1/1)") {
		t.Fatalf("the first to connect is rank 2:\n%s", h)
	}
	m = feed(t, m, evs[first+1:])
	for i, want := range []string{"rank 0 · pid 4243 (1/3)", "rank 1 · pid 4244 (2/3)", "rank 2 · pid 4242 (3/3)", "rank 0 · pid 4243 (1/3)"} {
		if h := headerOf(m); !strings.Contains(h, want) {
			t.Errorf("after %d tabs the header lacks %q:\n%s", i, want, h)
		}
		m = press(t, m, "tab")
	}
	line := regexp.MustCompile(`ranks peak MiB: .*`).FindString(m.View())
	// Four tabs: rank 1 is shown, in brackets.
	if !regexp.MustCompile(`^ranks peak MiB: 0 \d+ · \[1 \d+\] · 2 \d+ · spread \d+ MiB \(\d+\.\d%\)`).MatchString(line) {
		t.Errorf("all-ranks line: %q", line)
	}
	// The spread is the largest peak minus the smallest.
	lo, hi := session.Unknown, session.Unknown
	for _, p := range m.store.Processes() {
		v := peakOf(p)
		hi = hi.Max(v)
		if !lo.Known() || v < lo {
			lo = v
		}
	}
	if want := "spread " + (hi - lo).MiBString() + " MiB"; !strings.Contains(line, want) {
		t.Errorf("all-ranks line %q lacks %q", line, want)
	}
}

// The diagnosis page holds every line of the diagnosis in full, wrapped,
// at every width; on 80×24 it scrolls to its last line.
func TestDiagnosisPageShowsEveryLine(t *testing.T) {
	evs := demoEvents(t, "warmup", 30, 2)
	for _, w := range []int{80, 120, 160} {
		m := press(t, live(t, evs, w, 200), "d")
		d := m.diagnosis(m.process())
		body := flat(m.View())
		if strings.Contains(strings.Join(strings.Split(m.View(), "\n")[3:199], "\n"), "…") {
			t.Errorf("%d wide: the page cuts a line:\n%s", w, m.View())
		}
		for _, l := range d.Lines() {
			if !strings.Contains(body, flat(l)) {
				t.Errorf("%d wide: the page lacks %q", w, l)
			}
		}
		for _, want := range []string{"All processes", "rank 0 · pid 4242", "rank 1 · pid 4243", "spread: "} {
			if !strings.Contains(body, want) {
				t.Errorf("%d wide: the page lacks %q", w, want)
			}
		}
	}
	m := press(t, live(t, evs, 80, 24), "d")
	lines := m.pageLines(m.process(), m.diagnosis(m.process()))
	if len(lines) <= 24 {
		t.Fatalf("the page has %d lines: too few to test scrolling", len(lines))
	}
	last := strings.TrimSpace(ansi.Strip(lines[len(lines)-1]))
	if strings.Contains(m.View(), last) {
		t.Fatalf("the last line %q shows before scrolling", last)
	}
	if m = press(t, m, "end"); !strings.Contains(m.View(), last) || !strings.Contains(m.View(), "of "+strconv.Itoa(len(lines))) {
		t.Errorf("end does not reach the last line %q:\n%s", last, m.View())
	}
	if m = press(t, m, "home"); !strings.Contains(m.View(), "Diagnosis") {
		t.Errorf("home does not go back to the top:\n%s", m.View())
	}
}

// flat collapses whitespace, so wrapped text compares with its source.
func flat(s string) string { return strings.Join(strings.Fields(ansi.Strip(s)), " ") }

// At 80×24 the anatomy and the diagnosis have no room beside the chart:
// a key shows each on the whole body, the same key or esc comes back.
func TestEveryPanelReachableAt80x24(t *testing.T) {
	m := live(t, demoEvents(t, "warmup", 20, 1), 80, 24)
	if v := m.View(); strings.Contains(v, "Memory anatomy") || strings.Contains(v, "largest part") {
		t.Fatal("80×24 has no room for the panels: the test is moot")
	}
	tests := []struct {
		keys []string
		page page
		want []string
	}{
		{[]string{"a"}, pageAnatomy, []string{"Memory anatomy", "W weights", "C allocator cache", "X other processes", "reserved"}},
		{[]string{"a", "a"}, pageMain, []string{"Memory (GiB) ·", "step"}},
		{[]string{"a", "esc"}, pageMain, []string{"Memory (GiB) ·"}},
		{[]string{"d"}, pageDiag, []string{"Diagnosis", "largest part: activations", "needed (steady peak)"}},
		{[]string{"d", "a"}, pageAnatomy, []string{"Memory anatomy"}},
		{[]string{"d", "esc"}, pageMain, []string{"Memory (GiB) ·"}},
		{[]string{"?"}, pageHelp, []string{"Keys", "diagnosis", "anatomy"}},
	}
	for _, tt := range tests {
		got := press(t, m, tt.keys...)
		if got.page != tt.page {
			t.Errorf("%v: page %d, want %d", tt.keys, got.page, tt.page)
		}
		v := got.View()
		for _, w := range tt.want {
			if !strings.Contains(v, w) {
				t.Errorf("%v: the screen lacks %q:\n%s", tt.keys, w, v)
			}
		}
		if n := len(strings.Split(v, "\n")); n != 24 {
			t.Errorf("%v: %d lines", tt.keys, n)
		}
	}
}

// The help explains every letter and mark the screen uses.
func TestHelpHasAGlossary(t *testing.T) {
	m := press(t, live(t, demoEvents(t, "warmup", 5, 1), 80, 24), "?")
	var seen strings.Builder
	for i := 0; i < 4; i++ {
		seen.WriteString(m.View())
		m = press(t, m, "pgdown")
	}
	text := seen.String()
	for _, want := range []string{
		"Glossary", "W         weights", "G         gradients", "O         optimizer state", "A         activations",
		"T         other/temporaries", "C         allocator cache", "N         non-PyTorch", "X         other processes",
		"end       allocated at the end of the phase", "peak      the most allocated", "≥         a lower bound",
		"z f l b s phases: zero_grad, forward, loss, backward", "■ exited", "○ disconnected", "spread",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the help lacks %q", want)
		}
	}
}

// A real CPU run: no allocator, so the body is the phases' timings, not
// a memory chart and a table of dashes.
func TestCPURunCompactView(t *testing.T) {
	evs := recording(t, cpuRecording)
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		m := live(t, evs, size[0], size[1])
		v := m.View()
		for _, want := range []string{"CPU run (no CUDA device)", "Timings · CPU run", "zero_grad", "forward", "backward", "  39 "} {
			if !strings.Contains(v, want) {
				t.Errorf("%v: the screen lacks %q:\n%s", size, want, v)
			}
		}
		for _, bad := range []string{"Memory (GiB) ·", "–", "Memory anatomy", "GiB"} {
			if strings.Contains(v, bad) {
				t.Errorf("%v: a CPU run shows %q:\n%s", size, bad, v)
			}
		}
		row := regexp.MustCompile(`(?m)^  39 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +\d+ms`)
		if !row.MatchString(v) {
			t.Errorf("%v: step 39 is not a row of timings:\n%s", size, v)
		}
	}
	m := press(t, live(t, evs, 80, 24), "up")
	if !strings.Contains(m.View(), "following paused") {
		t.Error("the timings table does not scroll")
	}
	if v := press(t, m, "a").View(); !strings.Contains(v, "no GPU memory") {
		t.Errorf("the anatomy page of a CPU run:\n%s", v)
	}
}

// One device total on screen, labelled with its source: NVML's when the
// driver is read, else torch's; the anatomy panel uses the same one.
func TestOneDeviceTotal(t *testing.T) {
	evs := recording(t, liveRecording)
	var hookOnly []session.Event
	for _, ev := range evs {
		if ev.GPU == nil {
			hookOnly = append(hookOnly, ev)
		}
	}
	tests := []struct {
		name        string
		evs         []session.Event
		want, other string
	}{
		{"with NVML", evs, "79.6 GiB total (NVML)", "79.2 GiB"},
		{"hook only", hookOnly, "79.2 GiB total (torch)", "79.6 GiB"},
	}
	for _, tt := range tests {
		m := live(t, tt.evs, 160, 48, WithDevice("", nil))
		v := m.View()
		if !strings.Contains(headerOf(m), tt.want) {
			t.Errorf("%s: header lacks %q:\n%s", tt.name, tt.want, headerOf(m))
		}
		total := strings.Fields(tt.want)[0]
		if !strings.Contains(v, "of "+total+" GiB") {
			t.Errorf("%s: the anatomy panel does not use the same total %s GiB", tt.name, total)
		}
		if strings.Contains(v, tt.other) {
			t.Errorf("%s: a second total %s is on screen", tt.name, tt.other)
		}
	}
}

// A replay tells exited from disconnected too, also after a seek back
// rebuilt the store in the reader goroutine: pid 692's goodbye lies
// before the seek's target.
func TestReplayKeepsExitsAcrossSeekBack(t *testing.T) {
	evs := recording(t, liveRecording)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At.Before(evs[j].At) })
	bye1 := evs[indexWhere(t, evs, 0, isGoodbyeOn(1))].At
	bye2 := evs[indexWhere(t, evs, 0, isGoodbyeOn(2))].At
	var opens int
	m := playMax(t, streamModel(t, evs, &opens))
	if h := headerOf(m); !strings.Contains(h, "pid 728 (2/2) · ") || !strings.Contains(h, "■ exited") {
		t.Errorf("at the end:\n%s", h)
	}
	// At 1×, back by a quarter of a 5 s window until before pid 728's
	// goodbye (2.4 s after pid 692's).
	m = press(t, m, "s", "+", "+", "+")
	for i := 0; i < 10 && !m.replay.now.Before(bye2); i++ {
		m = pump(t, press(t, m, "left"))
	}
	if !m.replay.now.After(bye1) || !m.replay.now.Before(bye2) {
		t.Fatalf("the seek went to %v, not between the goodbyes at %v and %v: the test is moot", m.replay.now, bye1, bye2)
	}
	m, _ = update(t, m, frameTick(time.Time{}))
	v := m.View()
	if !strings.Contains(headerOf(m), "pid 728 (2/2) · ● connected") || !strings.Contains(v, "pid 692 4309 ■ · [pid 728") {
		t.Errorf("after a seek back:\n%s", v)
	}
}
