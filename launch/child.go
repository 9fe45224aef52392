package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
)

// Child is a running command.
type Child struct {
	cmd  *exec.Cmd
	argv []string
	done chan struct{}
	err  error // the command's end, set before done closes
}

// Spec says what to run and where its standard streams go.
type Spec struct {
	// Argv is the command and its arguments; Argv[0] is looked up on PATH.
	Argv []string
	// Env is the child's whole environment (see ChildEnv).
	Env []string
	// Stdin, Stdout and Stderr are the child's streams; nil is /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// ExtraFiles are open files the child inherits from descriptor 3 on
	// (the Lifeline's read end).
	ExtraFiles []*os.File
}

// Check says whether argv names a command that can be started, before
// anything else (a monitor, a recording) is set up for it.
func Check(argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command to run: put it after --, e.g. vramscope run -- python train.py")
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("run %s: %w", argv[0], err)
	}
	return nil
}

// Start starts the command. The child stays in vramscope's process group,
// so a terminal's Ctrl-C and job control reach it as they would without
// vramscope, and it may read the terminal (pdb works).
func Start(s Spec) (*Child, error) {
	if err := Check(s.Argv); err != nil {
		return nil, err
	}
	path, _ := exec.LookPath(s.Argv[0])
	cmd := &exec.Cmd{Path: path, Args: s.Argv, Env: s.Env, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, ExtraFiles: s.ExtraFiles}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", describe(s.Argv), err)
	}
	c := &Child{cmd: cmd, argv: s.Argv, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Signal sends sig to the child unless it has already exited.
func (c *Child) Signal(sig os.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(sig)
	}
}

// Wait waits for the child and returns nil when it exited 0, else an
// *ExitError with the code vramscope should exit with.
func (c *Child) Wait() error {
	<-c.done
	return exitError(c.argv, c.cmd.ProcessState, c.err)
}

func exitError(argv []string, ps *os.ProcessState, err error) error {
	if ps == nil {
		return fmt.Errorf("wait for %s: %w", describe(argv), err)
	}
	if sig, ok := killedBy(ps); ok {
		return &ExitError{Code: 128 + int(sig), Desc: fmt.Sprintf("%s was killed by %v", describe(argv), sig)}
	}
	if code := ps.ExitCode(); code != 0 {
		return &ExitError{Code: code, Desc: fmt.Sprintf("%s exited with status %d", describe(argv), code)}
	}
	return nil
}

// Relay passes the signals vramscope receives on to the child until stop is
// called or the child exits. vramscope itself does not die of them: it
// stays to record the command's last messages and to exit with its code.
//
// ttyDelivered reports whether a terminal's SIGINT or SIGQUIT has already
// reached the child: the terminal sends those to the whole foreground
// process group, which the child shares, and passing them on again would
// interrupt it twice (a second KeyboardInterrupt inside its cleanup). Other
// signals, and SIGINT sent with kill, are passed on. When notify is
// non-nil it gets each signal passed on, if it has room (the live view
// uses it to know the command was already told to stop).
func (c *Child) Relay(ttyDelivered func() bool, notify chan<- os.Signal) (stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, Relayed...)
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-quit:
				return
			case <-c.done:
				return
			case sig := <-ch:
				if ttyKey(sig) && ttyDelivered != nil && ttyDelivered() {
					continue
				}
				c.Signal(sig)
				if notify != nil {
					select {
					case notify <- sig:
					default:
					}
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
	}
}
