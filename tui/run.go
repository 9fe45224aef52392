package tui

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// QuitSignals end the view as q does: the final state drawn, the terminal
// restored, the recording closed. SIGHUP is the terminal going away (an SSH
// disconnect, a killed terminal window): it killed the program outright,
// leaving the terminal in the alternate screen, and an external SIGINT
// ended it as "program was killed" with status 1. Headless commands stop on
// the same signals.
var QuitSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// quitGrace is how long a signalled view has to quit before it is killed
// (a terminal that is gone may never take the last frame).
const quitGrace = time.Second

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
	opts = append([]tea.ProgramOption{tea.WithAltScreen(), tea.WithFPS(m.cfg.fps), tea.WithoutSignalHandler()}, opts...)
	p := tea.NewProgram(m, opts...)
	signalled := quitOnSignal(p, m.logf)
	defer func() {
		m.cancel()
		if r := recover(); r != nil {
			_ = p.ReleaseTerminal()
			err = fmt.Errorf("tui: panic: %v\n%s", r, debug.Stack())
			m.logf("%v", err)
		}
	}()
	_, err = p.Run()
	if sig := signalled(); sig != nil {
		m.logf("program ended on %v: %v", sig, err)
		return nil
	}
	if err != nil {
		m.logf("program ended: %v", err)
		if errors.Is(err, tea.ErrProgramPanic) {
			return fmt.Errorf("tui: %w (terminal restored)", err)
		}
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}

// quitOnSignal quits p on the first of QuitSignals, and kills it when it
// has not quit within quitGrace. The returned function stops listening and
// says which signal ended p, nil for none.
func quitOnSignal(p *tea.Program, logf func(string, ...any)) func() os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, QuitSignals...)
	done := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		select {
		case <-done:
			return
		case sig := <-ch:
			got <- sig
			logf("%v: quitting", sig)
			go p.Quit()
			select {
			case <-done:
			case <-time.After(quitGrace):
				p.Kill()
			}
		}
	}()
	return func() os.Signal {
		signal.Stop(ch)
		close(done)
		select {
		case sig := <-got:
			return sig
		default:
			return nil
		}
	}
}
