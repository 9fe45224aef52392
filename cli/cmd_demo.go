package cli

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/pipeline"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/session"
	"github.com/vramscope/vramscope/tui"
)

type demoFlags struct {
	headless bool
	steps    int
	scenario string
	out      string
	ranks    int
	speed    float64
	debug    string
}

func newDemoCmd() *cobra.Command {
	var o demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a built-in simulated training run (no GPU, no Python needed)",
		Long: `demo plays a simulated training process that speaks the real protocol over a
real socket, with a simulated NVML device, so every view works anywhere.

Scenarios: ` + strings.Join(demo.Scenarios(), ", ") + `. The default, warmup, reproduces a real
seq2seq + Adam measurement whose peak grows over steps 0 and 1, then levels off.

With --headless it runs without the TUI (as fast as it can unless --speed is
given), optionally records with -o, and prints the report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := demo.Lookup(o.scenario)
			if err != nil {
				return err
			}
			if o.headless {
				return runDemoHeadless(cmd.Context(), sc, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runDemoTUI(cmd.Context(), sc, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.headless, "headless", false, "run without the TUI and print the report")
	f.IntVar(&o.steps, "steps", -1, "optimizer steps to simulate (default: 20 headless, until quit in the TUI)")
	f.StringVar(&o.scenario, "scenario", "warmup", "scenario: "+strings.Join(demo.Scenarios(), ", "))
	f.StringVarP(&o.out, "output", "o", "", "also record the session to this file")
	f.IntVar(&o.ranks, "ranks", 1, "simulated ranks (torchrun processes on one machine)")
	f.Float64Var(&o.speed, "speed", -1, "pace factor: 1 is real time, 0 as fast as possible (default: 0 headless, 1 in the TUI)")
	addDebugFlag(f, &o.debug)
	return cmd
}

// demoSource starts a private socket server, the simulated NVML device and
// the demo's ranks; everything they produce lands in the returned feed.
// done is closed when the demo has sent its last message.
func demoSource(ctx context.Context, sc demo.Scenario, o demoFlags, logf func(string, ...any)) (f *feed.Feed, done <-chan error, cleanup func(), err error) {
	sock, rmdir, err := demo.PrivateSocket()
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := ipc.Listen(ipc.WithSocketPath(sock), ipc.WithLogf(logf))
	if err != nil {
		rmdir()
		return nil, nil, nil, err
	}
	f = feed.New(feed.WithOpener(pipeline.Recorder(toolName(), record.SourceDemo)))
	if o.out != "" {
		if err := f.Start(o.out); err != nil {
			srv.Close()
			rmdir()
			return nil, nil, nil, err
		}
	}
	sctx, stopServer := context.WithCancel(context.Background())
	// The simulated NVML follows the hook lines the server receives, not
	// the ones the demo sends: a sample is never recorded ahead of them.
	tap := demo.NewNVMLTap(demo.NewSimNVML(f.Samples))
	served := pipeline.ServeTo(sctx, srv, tap.Deliver(f.Deliver), logf)
	errc := make(chan error, 1)
	go func() {
		errc <- demo.Run(ctx, sock, sc,
			demo.WithSteps(o.steps), demo.WithSpeed(o.speed), demo.WithRanks(o.ranks))
	}()
	cleanup = func() {
		stopServer()
		srv.Close()
		<-served
		_ = f.Stop()
		rmdir()
	}
	return f, errc, cleanup, nil
}

// runDemoTUI shows the demo live: the same views as a real run.
func runDemoTUI(ctx context.Context, sc demo.Scenario, o demoFlags) error {
	if o.steps < 0 {
		o.steps = 0
	}
	if o.speed < 0 {
		o.speed = 1
	}
	logf, closeLog, err := debugLog(o.debug)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, cancel := context.WithCancel(orBackground(ctx))
	defer cancel()
	f, done, cleanup, err := demoSource(ctx, sc, o, logf)
	if err != nil {
		return err
	}
	defer cleanup()
	sim := probe.NewSimulated()
	devs, _ := sim.Devices()
	err = tui.Run(tui.New(
		tui.WithSource(f), tui.WithRecorder(f, defaultRecording()),
		tui.WithDevice("simulated", devs), tui.WithTitle("demo: "+sc.Name),
		tui.WithDebugLog(logWriter(logf)),
	))
	cancel()
	if derr := <-done; derr != nil {
		logf("demo: %v", derr)
	}
	return err
}

func runDemoHeadless(ctx context.Context, sc demo.Scenario, o demoFlags, stdout, stderr io.Writer) error {
	if o.steps < 0 {
		o.steps = 20
	}
	if o.speed < 0 {
		o.speed = 0
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, tui.QuitSignals...)
	defer stop()
	logf := stderrLog(stderr)
	f, done, cleanup, err := demoSource(ctx, sc, o, logf)
	if err != nil {
		return err
	}
	defer cleanup()
	store := session.New()
	var runErr error
	warned := false
	// Until the demo's clients are done, whatever ctx says: they stop on
	// it themselves, and their last lines still count.
	pipeline.Consume(context.WithoutCancel(ctx), f, store, 50*time.Millisecond, func() bool {
		select {
		case runErr = <-done:
			return false
		default:
		}
		if err := f.Err(); err != nil && !warned {
			warned = true // the demo goes on for its report; the exit status says it
			fmt.Fprintf(stderr, "vramscope: %v\n", err)
		}
		return true
	})
	// The server may still hold the last lines: wait until every rank said
	// goodbye (bounded).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && connected(store); {
		pipeline.Drain(f, store, 20*time.Millisecond)
	}
	pipeline.Drain(f, store, 20*time.Millisecond)
	if runErr != nil && ctx.Err() == nil {
		return fmt.Errorf("demo: %w", runErr)
	}
	var recErr error
	if o.out != "" {
		recorded := f.Recorded()
		recErr = f.Err()
		if err := f.Stop(); err != nil && recErr == nil {
			recErr = err
		}
		fmt.Fprintln(stderr, summary(store, o.out, recorded, f.Rejected()))
		if recErr != nil && !warned {
			fmt.Fprintf(stderr, "vramscope: %v\n", recErr)
		}
	}
	if err := report.Build(store).WriteText(stdout); err != nil {
		return err
	}
	if recErr != nil {
		return fmt.Errorf("the recording %s is incomplete: %w", o.out, recErr)
	}
	return nil
}

func connected(s *session.Store) bool {
	if len(s.Processes()) == 0 {
		return true
	}
	for _, p := range s.Processes() {
		if p.Connected {
			return true
		}
	}
	return false
}
