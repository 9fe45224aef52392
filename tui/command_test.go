package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// fakeCommand is a training command that ends when done is closed.
type fakeCommand struct {
	done  chan struct{}
	ended string
}

func (f *fakeCommand) Done() <-chan struct{} { return f.done }
func (f *fakeCommand) Ended() string         { return f.ended }

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

// Under `vramscope run` a first q while the training runs asks; a second
// ends it; any other key in between cancels the question. Once the
// command has exited, q quits at once.
func TestQuitAsksOnceWhileTheCommandRuns(t *testing.T) {
	evs := demoEvents(t, "warmup", 3, 1)
	evs = evs[:len(evs)-1]
	c := &fakeCommand{done: make(chan struct{}), ended: "python train.py exited with status 0"}
	m := live(t, evs, 80, 24, WithCommand(c), WithTitle("run: python train.py"), WithOutputLog("train.log"))
	m, cmd := update(t, m, keyMsg("q"))
	if isQuit(cmd) || !strings.Contains(m.View(), "q again ends the training") {
		t.Fatalf("a first q quit or did not ask:\n%s", m.View())
	}
	m, _ = update(t, m, keyMsg("d")) // goes on
	if strings.Contains(m.View(), "q again ends") {
		t.Fatalf("another key left the question up")
	}
	m, cmd = update(t, m, keyMsg("q"))
	if isQuit(cmd) {
		t.Fatal("the first q after another key quit")
	}
	if _, cmd = update(t, m, keyMsg("q")); !isQuit(cmd) {
		t.Fatal("the second q did not quit")
	}
	close(c.done)
	m, _ = update(t, live(t, evs, 80, 24, WithCommand(c)), commandDoneMsg{ended: c.ended})
	if _, cmd = update(t, m, keyMsg("q")); !isQuit(cmd) {
		t.Fatal("q after the command exited did not quit at once")
	}
	// A q asking while the command was exiting (its hook had said goodbye)
	// is answered by its end: the view quits.
	m = live(t, evs, 80, 24, WithCommand(c))
	m, _ = update(t, m, keyMsg("q"))
	if _, cmd = update(t, m, commandDoneMsg{ended: c.ended}); !isQuit(cmd) {
		t.Fatal("the command ended under the question, and the view stayed")
	}
}

// A script that dies before training: the waiting screen says how the
// command ended and shows its last lines (the traceback), escaped.
func TestCommandThatDiesBeforeTrainingSaysWhy(t *testing.T) {
	c := &fakeCommand{done: make(chan struct{})}
	m := New(WithCommand(c), WithTitle("run: python train.py"), WithOutputLog("train.log"))
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	if v := m.View(); !strings.Contains(v, "Waiting for python train.py to start training") || strings.Contains(v, "Add this to your training script") {
		t.Errorf("while it runs:\n%s", v)
	}
	m, _ = update(t, m, commandDoneMsg{ended: "python train.py exited with status 1"})
	m, _ = update(t, m, outputMsg{lines: []string{"Traceback (most recent call last):", `  File "train.py", line 3, in <module>`, "ModuleNotFoundError: No module named 'transformers'"}})
	v := m.View()
	for _, want := range []string{"■ command exited", "python train.py exited with status 1 before any training process connected", "ModuleNotFoundError: No module named 'transformers'"} {
		if !strings.Contains(v, want) {
			t.Errorf("no %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "waiting for a training process") {
		t.Errorf("still waiting:\n%s", v)
	}
	checkNoCut(t, v, 80)
}

func checkNoCut(t *testing.T, v string, w int) {
	t.Helper()
	for i, l := range strings.Split(v, "\n") {
		if width(l) > w {
			t.Errorf("line %d is %d cells wide", i, width(l))
		}
	}
}

// Keys that do nothing here say why, in the footer, until the next key: o
// outside `vramscope run`, tab with one process.
func TestKeysThatDoNothingSaySo(t *testing.T) {
	evs := demoEvents(t, "warmup", 3, 1)
	m := live(t, evs[:len(evs)-1], 80, 24)
	for _, c := range []struct{ key, want string }{
		{"o", "under `vramscope run -- COMMAND` only"},
		{"tab", "one training process, no other to show"},
	} {
		m = press(t, m, c.key)
		v := m.View()
		if !strings.Contains(v, c.want) {
			t.Errorf("%s: the footer lacks %q:\n%s", c.key, c.want, v)
		}
		checkNoCut(t, v, 80)
		if m = press(t, m, "+"); strings.Contains(m.View(), c.want) {
			t.Errorf("%s: the notice outlived the next key", c.key)
		}
	}
}
