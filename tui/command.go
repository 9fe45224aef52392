package tui

import (
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/internal/textesc"
)

// Command is the training command `vramscope run` started (WithCommand).
// While it runs, q asks once before ending it; once it has exited before
// any training process connected, the waiting screen says how it ended
// and shows its last lines.
type Command interface {
	// Done is closed when the command has exited.
	Done() <-chan struct{}
	// Ended says how it ended, once Done is closed: "python train.py
	// exited with status 1".
	Ended() string
}

// commandDoneMsg says the command has exited, and how.
type commandDoneMsg struct{ ended string }

// waitCommand blocks until the command exits (a command, never Update).
func waitCommand(c Command) tea.Cmd {
	return func() tea.Msg {
		<-c.Done()
		return commandDoneMsg{ended: c.Ended()}
	}
}

// onCommandDone records the command's end and reads its output once, for
// the waiting screen. A q that was asking whether to end the training is
// answered: the training has ended, so the view quits.
func (m *Model) onCommandDone(msg commandDoneMsg) tea.Cmd {
	m.cmdEnded = textesc.String(msg.ended)
	if m.quitAsked {
		m.cancel()
		return tea.Quit
	}
	m.render()
	if m.cfg.outputLog == "" {
		return nil
	}
	return readOutput(m.cfg.outputLog)
}

// commandRunning reports whether q would end a training command that is
// still running.
func (m *Model) commandRunning() bool {
	return m.cfg.command != nil && m.cmdEnded == ""
}

// boxChrome is the cells the waiting screen's box takes around its text
// (borders and padding).
const boxChrome = 6

// quitNotice is the footer's question after a first q while the command
// runs.
const quitNotice = "q again ends the training (it is still running) · any other key goes on"

// endedLines are the waiting screen of a command that exited before any
// training process connected: how it ended, then its output's last lines
// (at most rows of them).
func (m *Model) endedLines(rows int) []string {
	lines := []string{
		styleBad.Render("■ " + m.cmdEnded + " before any training process connected"),
		"",
	}
	if n := len(m.outLines); n > 0 {
		lines = append(lines, "Its last lines (o shows more; all of it is in "+textesc.String(m.cfg.outputLog)+"):", "")
		for _, l := range m.outLines[max(n-rows, 0):] {
			lines = append(lines, truncate(l, m.w-boxChrome))
		}
	} else if m.cfg.outputLog != "" {
		lines = append(lines, "It printed nothing to "+textesc.String(m.cfg.outputLog)+".")
	}
	return lines
}

// waitingRunLines are the waiting screen while the command runs and no
// training process has connected yet: the hook attaches itself (no code
// to add), and o shows what the command prints meanwhile.
func (m *Model) waitingRunLines() []string {
	return []string{
		styleBold.Render("Waiting for " + strings.TrimPrefix(textesc.String(m.cfg.title), "run: ") + " to start training"),
		"",
		"The hook attaches itself to the first model that trains.",
		"o shows what the command prints meanwhile.",
	}
}
