package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/internal/safefs"
	"github.com/vramscope/vramscope/launch"
	"github.com/vramscope/vramscope/tui"
)

// hookTree is the hook package, carried in the binary so `vramscope run`
// attaches the same version of the hook to any Python (docs/run.md). main
// embeds it (only the root package can reach pyhook/) and hands it to
// NewRootCmd; its root is the repository's, so the package is at
// pyhook/vramscope.
var hookTree fs.FS

type runFlags struct {
	record    string
	socket    string
	log       string
	debug     string
	noAttach  bool
	nvmlEvery time.Duration
	procEvery time.Duration
	prom      string // --prometheus ADDR, passed on to record or the live view
}

// lastWords is how long the monitor keeps reading after the command has
// exited: its last messages (goodbye included) are already in the socket
// buffers, the server only has to read them.
const lastWords = 500 * time.Millisecond

func newRunCmd() *cobra.Command {
	var o runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run a training command with the hook attached, no code change",
		Long: `run starts the monitor (the live view, or headless with --record FILE),
then runs COMMAND with the hook attached through a startup module: every
Python process it starts (torchrun's and accelerate's workers too) hooks the
first model that trains and its optimizer. Both sides use a private socket
(VRAMSCOPE_SOCKET in the command's environment). Signals are passed on to
the command, and vramscope exits with its exit code. In the live view the
command's output goes to --log: the header names the file and o shows its
last lines. Quitting the view interrupts the command.
An explicit vramscope.watch() in the script wins over auto-attach.
See docs/run.md.`,
		Example: `  vramscope run -- python train.py --epochs 3
  vramscope run --record run.jsonl.gz -- torchrun --nproc_per_node 2 train.py
  vramscope run -- accelerate launch train.py`,
		Args: cobra.ArbitraryArgs, // launch.Check says what is missing
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd.Context(), o, args, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after COMMAND is the command's
	f.StringVar(&o.record, "record", "", "headless: record to this file (.gz: gzip) instead of showing the live view; the command keeps the terminal")
	f.StringVar(&o.socket, "socket", "", "socket path (default: a private one for this run)")
	f.StringVar(&o.log, "log", "", "live view: file for the command's output (default vramscope-run-DATE-TIME.log)")
	f.StringVar(&o.debug, "debug", "", "live view: write a debug log to this file")
	f.BoolVar(&o.noAttach, "no-attach", false, "set the socket only: no auto-attach (the script calls vramscope.watch itself)")
	addNVMLFlags(cmd, &o.nvmlEvery, &o.procEvery)
	addPrometheusFlag(cmd, &o.prom)
	return cmd
}

func runRun(ctx context.Context, o runFlags, argv []string, stderr io.Writer) error {
	ctx = orBackground(ctx)
	if err := launch.Check(argv); err != nil {
		return err
	}
	// 0700, under $XDG_RUNTIME_DIR, for the socket; what a killed run left
	// is removed here.
	dir, removeDir, err := launch.PrivateDir()
	if err != nil {
		return err
	}
	defer removeDir()
	// The child learns from this pipe when this process dies, even by
	// SIGKILL, and says so once (docs/run.md).
	life, err := launch.NewLifeline()
	if err != nil {
		return err
	}
	defer life.Close()
	socket := o.socket
	if socket == "" {
		socket = filepath.Join(dir, "vramscope.sock")
	}
	hook, err := launch.SubFS(hookTree, "pyhook/vramscope")
	if err != nil {
		return err
	}
	// Never removed, and no other user can create or write it: a process
	// the command leaves behind keeps this PYTHONPATH (docs/run.md).
	py, err := launch.StartupDir(hook)
	if err != nil {
		return err
	}
	spec := launch.Spec{Argv: argv, Env: append(launch.ChildEnv(os.Environ(), socket, py, !o.noAttach), life.Env()),
		ExtraFiles: []*os.File{life.ChildEnd()}}
	if o.record != "" {
		spec.Stdin, spec.Stdout, spec.Stderr = os.Stdin, os.Stdout, os.Stderr
		return runHeadless(ctx, o, socket, spec, stderr)
	}
	return runWithTUI(ctx, o, socket, spec, stderr)
}

// runHeadless records while the command runs in the foreground, then stops.
func runHeadless(ctx context.Context, o runFlags, socket string, spec launch.Spec, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listening := make(chan struct{})
	recorded := make(chan error, 1)
	ro := recordFlags{out: o.record, socket: socket, nvmlEvery: o.nvmlEvery, procEvery: o.procEvery, prom: o.prom}
	go func() {
		recorded <- recordUntil(ctx, ro, stderr, func(path string) {
			fmt.Fprintf(stderr, "vramscope: recording to %s; running %s with VRAMSCOPE_SOCKET=%s\n", o.record, launch.Describe(spec.Argv), path)
			close(listening)
		})
	}()
	select {
	case err := <-recorded:
		return err
	case <-listening:
	}
	child, err := launch.Start(spec)
	if err != nil {
		cancel()
		<-recorded
		return err
	}
	stop := child.Relay(launch.Foreground, nil)
	childErr := child.Wait()
	stop()
	time.AfterFunc(lastWords, cancel)
	if err := <-recorded; err != nil {
		return err
	}
	return childErr
}

// runWithTUI shows the live view while the command runs with its output in
// a log file; the view stays after the command ends, until the user quits.
// Signals reach the command from its start: a SIGTERM from a scheduler
// stops it even while the view is up (bubbletea quits the view on it too).
func runWithTUI(ctx context.Context, o runFlags, socket string, spec launch.Spec, stderr io.Writer) error {
	logPath := o.log
	if logPath == "" {
		logPath = "vramscope-run-" + time.Now().Format("20060102-150405") + ".log"
	}
	out, err := openRunLog(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	spec.Stdout, spec.Stderr = out, out // stdin: /dev/null, the view reads the keyboard
	var (
		child    *launch.Child
		startErr error
		relayed  = make(chan os.Signal, 4)
	)
	stop := func() {}
	lf := liveFlags{socket: socket, debug: o.debug, nvmlEvery: o.nvmlEvery, procEvery: o.procEvery, prom: o.prom,
		title: "run: " + launch.Describe(spec.Argv), outputLog: logPath,
		// Called by runLive on this goroutine once the server listens,
		// before the view starts.
		listening: func(string) tui.Command {
			if child, startErr = launch.Start(spec); startErr != nil {
				return nil
			}
			stop = child.Relay(nil, relayed) // the view's raw terminal sends no signals
			return runCommand{child, spec.Argv}
		}}
	liveErr := runLive(ctx, lf)
	defer func() { stop() }()
	if child == nil {
		if startErr != nil {
			return startErr
		}
		return liveErr
	}
	told := stopSignal(relayed)
	if told == nil && liveErr != nil {
		// The view may have ended on a signal whose relay is a moment behind.
		select {
		case told = <-relayed:
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-child.Done():
	default:
		if told != nil {
			fmt.Fprintf(stderr, "vramscope: %s (pid %d) got %v; waiting for it to exit (Ctrl-C kills it)\n", launch.Describe(spec.Argv), child.PID(), told)
		} else {
			fmt.Fprintf(stderr, "vramscope: interrupting %s (pid %d); waiting for it to exit (Ctrl-C again kills it)\n", launch.Describe(spec.Argv), child.PID())
			child.Signal(os.Interrupt)
		}
		for waiting := true; waiting; {
			select {
			case <-child.Done():
				waiting = false
			case sig := <-relayed:
				if launch.Stopping(sig) {
					child.Signal(os.Kill)
				}
			}
		}
	}
	fmt.Fprintf(stderr, "vramscope: the command's output is in %s\n", logPath)
	if liveErr != nil && told == nil {
		return liveErr // a signal ends the view with an error of its own: the command's code says more
	}
	return child.Wait()
}

// runCommand is the started command as the live view sees it
// (tui.Command).
type runCommand struct {
	child *launch.Child
	argv  []string
}

func (r runCommand) Done() <-chan struct{} { return r.child.Done() }

// Ended says how the command ended: "python train.py exited with status
// 1", "… was killed by killed".
func (r runCommand) Ended() string {
	var ee *launch.ExitError
	switch err := r.child.Wait(); {
	case errors.As(err, &ee):
		return ee.Desc
	case err != nil:
		return err.Error()
	}
	return launch.Describe(r.argv) + " exited with status 0"
}

// openRunLog opens the file for the command's output: 0600, as it may
// carry what the command prints of hosts and paths, emptied when it is a
// file of the user's, never through a symlink (the default name is
// predictable to the second).
func openRunLog(path string) (*os.File, error) {
	f, err := safefs.OpenFile(path, safefs.Truncate, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the command's log: %w", err)
	}
	return f, nil
}

// stopSignal returns the first stop signal already passed on, or nil.
func stopSignal(relayed <-chan os.Signal) os.Signal {
	for {
		select {
		case sig := <-relayed:
			if launch.Stopping(sig) {
				return sig
			}
		default:
			return nil
		}
	}
}
