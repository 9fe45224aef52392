package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/pipeline"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/tui"
)

type liveFlags struct {
	socket    string
	record    string
	debug     string
	prom      string
	nvmlEvery time.Duration
	procEvery time.Duration
	// title replaces the header's first words (`vramscope run` names its
	// command there); listening, when set, gets the socket path once the
	// server listens. Neither is a flag.
	title     string
	listening func(string)
}

func (l *liveFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	addSocketFlag(f, &l.socket)
	f.StringVar(&l.record, "record", "", "record the session to this file while showing it (.gz: gzip)")
	addDebugFlag(f, &l.debug)
	addNVMLFlags(cmd, &l.nvmlEvery, &l.procEvery)
	addPrometheusFlag(cmd, &l.prom)
}

// defaultRecording is where 'r' records when no --record was given.
func defaultRecording() string {
	return "vramscope-" + time.Now().Format("20060102-150405") + ".jsonl.gz"
}

// runLive is `vramscope` with no subcommand: listen, sample NVML, show.
func runLive(ctx context.Context, l liveFlags) error {
	logf, closeLog, err := debugLog(l.debug)
	if err != nil {
		return err
	}
	defer closeLog()
	srv, err := ipc.Listen(ipc.WithSocketPath(l.socket), ipc.WithLogf(logf))
	if err != nil {
		return err
	}
	defer srv.Close()
	prom := newPromExport(l.prom)
	f := feed.New(append([]feed.Option{feed.WithOpener(pipeline.Recorder(toolName(), record.SourceLive))}, prom.feedOptions()...)...)
	if l.record != "" {
		if err := f.Start(l.record); err != nil {
			return err
		}
	}
	defer f.Stop()
	ctx, cancel := context.WithCancel(orBackground(ctx))
	defer cancel()
	if err := prom.start(ctx, logf); err != nil {
		return err
	}
	mon := pipeline.StartMonitor(ctx, srv, f, logf, l.nvmlEvery, l.procEvery)
	defer mon.Close()
	sampler := mon.Sampler
	devs, _ := sampler.Devices()
	logf("listening on %s; %s", srv.Path(), sampler.Status())
	opts := []tui.Option{
		tui.WithSource(f), tui.WithRecorder(f, defaultRecording()),
		tui.WithDevice(sampler.Status(), devs), tui.WithSocket(srv.Path()),
		tui.WithDebugLog(logWriter(logf)),
	}
	if l.title != "" {
		opts = append(opts, tui.WithTitle(l.title))
	}
	if l.listening != nil {
		l.listening(srv.Path())
	}
	err = tui.Run(tui.New(opts...))
	cancel()
	mon.Stop()
	if rerr := f.Err(); rerr != nil && err == nil {
		// The TUI showed it; the exit status and the terminal say it too.
		err = rerr
	}
	if serr := f.Stop(); serr != nil && err == nil {
		err = serr // the last flush can meet the full disk too
	}
	return err
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

func newReplayCmd() *cobra.Command {
	var debug string
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Show a recording in the TUI (pause, seek, speed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(args[0], debug, cmd.ErrOrStderr())
		},
	}
	addDebugFlag(cmd.Flags(), &debug)
	return cmd
}

// runReplay shows a recording, streamed from the file: a long recording
// costs a window of events in memory, not all of them.
func runReplay(path, debug string, stderr io.Writer) error {
	hdr, open, warned, err := pipeline.OpenReplay(path)
	if err != nil {
		return err
	}
	logf, closeLog, err := debugLog(debug)
	if err != nil {
		return err
	}
	defer closeLog()
	status := "recorded"
	if hdr.Source == record.SourceDemo {
		status = "simulated"
	}
	err = tui.Run(tui.New(
		tui.WithReplayStream(open), tui.WithDevice(status, nil),
		tui.WithTitle("replay: "+path), tui.WithDebugLog(logWriter(logf)),
	))
	for _, w := range warned.Lines() { // after the TUI: it owns the terminal
		fmt.Fprintf(stderr, "vramscope: warning: %s\n", w)
		logf("replay: warning: %s", w)
	}
	return err
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// logWriter adapts a logf to an io.Writer, one write a line.
type logWriter func(string, ...any)

func (l logWriter) Write(p []byte) (int, error) {
	l("%s", p)
	return len(p), nil
}
