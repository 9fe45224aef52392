package tui

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"
)

// The output page (o): the last lines of the log the training command's
// output goes to under `vramscope run` (WithOutputLog). The file is read
// in a command, never in Update, once when the page opens and once a
// second while it stays open. Every byte is shown escaped: the script's
// output never drives the terminal.

// outputTail is how much of the end of the log is read.
const outputTail = 64 << 10

// outputMsg hands Update the log's last lines.
type outputMsg struct {
	lines []string
	size  int64
	err   error
}

// outputTick re-reads the log while its page is open.
type outputTick time.Time

// readOutput reads the end of the log at path: its last lines, escaped.
func readOutput(path string) tea.Cmd {
	return func() tea.Msg {
		f, err := os.Open(path)
		if err != nil {
			return outputMsg{err: err}
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return outputMsg{err: err}
		}
		from := max(fi.Size()-outputTail, 0)
		b := make([]byte, fi.Size()-from)
		if _, err := f.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
			return outputMsg{err: err}
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if from > 0 && len(lines) > 1 {
			lines = lines[1:] // the first is a part of a line
		}
		for i, l := range lines {
			lines[i] = terminalLine(l)
		}
		if len(lines) == 1 && lines[0] == "" {
			lines = nil
		}
		return outputMsg{lines: lines, size: fi.Size()}
	}
}

// terminalLine is what a terminal would leave of a line written with
// carriage returns (a progress bar redraws itself with \r), with every
// other control byte, escape sequences included, and any invalid UTF-8
// shown as a visible escape.
func terminalLine(s string) string {
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimRight(s, "\r")
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString("    ")
		case r < 0x20 || r == 0x7f:
			b.WriteByte('^')
			b.WriteByte(byte(r) ^ 0x40) // ^[ for ESC, ^? for DEL
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// outputLines is the output page: where the output goes, then its last
// lines, wrapped.
func (m *Model) outputLines() []string {
	w := max(m.w-1, 20)
	out := []string{
		rendered(&styleHeading, "Command output") + rendered(&styleDim, "  (o or esc to close)"),
		"the command's output goes to " + m.cfg.outputLog + rendered(&styleDim, " · its last lines, read once a second:"),
		"",
	}
	switch {
	case m.outErr != "":
		out = append(out, styleWarn.Render("cannot read it: "+m.outErr))
	case len(m.outLines) == 0:
		out = append(out, rendered(&styleDim, "(nothing written yet)"))
	}
	for _, l := range m.outLines {
		out = append(out, wrapHanging("", l, w, 2)...)
	}
	return out
}

// onOutput takes the log's lines; while the page is open the view follows
// their end, as tail -f does, unless the reader scrolled up.
func (m *Model) onOutput(msg outputMsg) tea.Cmd {
	atEnd := m.page == pageOutput && m.pg.top >= max(len(m.outputLines())-pageRows(len(m.outputLines()), m.layout().bodyH), 0)
	m.outLines, m.outErr = msg.lines, ""
	if msg.err != nil {
		m.outErr = msg.err.Error()
	}
	if atEnd || m.outFresh {
		m.pg.top = len(m.outputLines()) // the pager clamps it to the last page
		m.pg = m.pg.clamp(len(m.outputLines()), m.layout().bodyH)
	}
	m.outFresh = false
	if m.page != pageOutput {
		return nil
	}
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return outputTick(t) })
}
