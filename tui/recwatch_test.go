package tui

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// stoppingRecorder is a recording that stops by itself, as the feed's does
// when the disk fills.
type stoppingRecorder struct {
	fakeRecorder
	err error
}

func (s *stoppingRecorder) Err() error { return s.err }

// The live view kept showing ● REC on a recording that
// had stopped on a full disk. The next batch brings the error instead.
func TestRecordingStoppedByItselfIsShown(t *testing.T) {
	rec := &stoppingRecorder{fakeRecorder: fakeRecorder{path: "run.vrec"}}
	evs := demoEvents(t, "warmup", 3, 1)
	m := live(t, evs, 120, 40, WithRecorder(rec, "x.vrec"))
	if !strings.Contains(m.View(), "● REC run.vrec") {
		t.Fatal("the recording is not shown at first")
	}
	rec.path, rec.err = "", errors.New("recording to run.vrec stopped: "+syscall.ENOSPC.Error())
	_, cmd := update(t, m, batchMsg(evs[:1]))
	var got *recordMsg
	for _, msg := range runCmds(cmd) {
		if r, ok := msg.(recordMsg); ok {
			got = &r
		}
	}
	if got == nil {
		t.Fatal("a batch after the failure brought no record message")
	}
	m, _ = update(t, m, *got)
	v := m.View()
	if strings.Contains(v, "● REC") || !strings.Contains(v, "no space left on device") {
		t.Errorf("header after the failure:\n%s", strings.Split(v, "\n")[0])
	}
	// A healthy recording brings nothing.
	rec.path, rec.err = "run.vrec", nil
	if c := watchRecording(rec, "run.vrec"); c() != nil {
		t.Error("a healthy recording was reported")
	}
}

// runCmds runs a command and the commands of a batch, each for at most
// 50 ms (ticks are left waiting), and returns the messages they produced.
func runCmds(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	go func() { ch <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-ch:
	case <-time.After(50 * time.Millisecond):
		return nil
	}
	if b, ok := msg.(tea.BatchMsg); ok {
		var out []tea.Msg
		for _, c := range b {
			out = append(out, runCmds(c)...)
		}
		return out
	}
	return []tea.Msg{msg}
}
