package tui

import (
	"errors"
	"fmt"
	"runtime/debug"

	tea "github.com/charmbracelet/bubbletea"
)

// Run runs m full screen (alternate screen) until the user quits, and
// restores the terminal on the way out, a panic included. bubbletea
// recovers panics in Update, View and commands itself: it restores the
// terminal, prints the panic once the screen is back, and Run returns an
// error wrapping tea.ErrProgramPanic. Should the caller turn that off
// (tea.WithoutCatchPanics), Run recovers the panic, releases the terminal
// and returns it as an error with its stack.
func Run(m Model, opts ...tea.ProgramOption) (err error) {
	// The renderer flushes on its own ticker (60 Hz by default) even when
	// nothing changed; frames come at most fps times a second, so flushing
	// faster only costs wakeups.
	opts = append([]tea.ProgramOption{tea.WithAltScreen(), tea.WithFPS(m.cfg.fps)}, opts...)
	p := tea.NewProgram(m, opts...)
	defer func() {
		m.cancel()
		if r := recover(); r != nil {
			_ = p.ReleaseTerminal()
			err = fmt.Errorf("tui: panic: %v\n%s", r, debug.Stack())
			m.logf("%v", err)
		}
	}()
	if _, err := p.Run(); err != nil {
		m.logf("program ended: %v", err)
		if errors.Is(err, tea.ErrProgramPanic) {
			return fmt.Errorf("tui: %w (terminal restored)", err)
		}
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}
