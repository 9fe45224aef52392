package cli

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/pipeline"
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
	// server listens and returns the command it started (nil: none).
	// Neither is a flag.
	title     string
	listening func(string) tui.Command
	outputLog string // run: where the command's output goes (the o page)
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

// trainingDefault is the socket a training process started from this
// shell's environment, without VRAMSCOPE_SOCKET, connects to.
func trainingDefault() string {
	path, _ := ipc.SocketPathFor(func(k string) string {
		if k == "VRAMSCOPE_SOCKET" {
			return ""
		}
		return os.Getenv(k)
	}, os.Getuid())
	return path
}

// runLive is `vramscope` with no subcommand: listen, sample NVML, show.
func runLive(ctx context.Context, l liveFlags) error {
	logf, closeLog, err := debugLog(l.debug)
	if err != nil {
		return err
	}
	defer closeLog()
	suspicion := pipeline.NewSuspicion(recordDir(l.record))
	srv, err := ipc.Listen(ipc.WithSocketPath(l.socket), ipc.WithLogf(logf), suspicion.ServerOption())
	if err != nil {
		return err
	}
	defer srv.Close()
	prom := newPromExport(l.prom)
	f := feed.New(append([]feed.Option{feed.WithOpener(pipeline.Recorder(toolName(), record.SourceLive)), suspicion.FeedOption()}, prom.feedOptions()...)...)
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
	suspicion.Start(ctx, srv, f)
	defer mon.Close()
	sampler := mon.Sampler
	devs, _ := sampler.Devices()
	logf("listening on %s; %s", srv.Path(), sampler.Status())
	opts := []tui.Option{
		tui.WithSource(f), tui.WithRecorder(f, defaultRecording()),
		tui.WithDevice(sampler.Status(), devs), tui.WithSocket(srv.Path()),
		tui.WithDebugLog(logWriter(logf)), tui.WithCensusAsker(suspicion.Ask),
	}
	if l.title != "" {
		opts = append(opts, tui.WithTitle(l.title))
	}
	if l.outputLog != "" {
		opts = append(opts, tui.WithOutputLog(l.outputLog))
	}
	if l.listening != nil {
		if c := l.listening(srv.Path()); c != nil {
			opts = append(opts, tui.WithCommand(c))
		}
	} else {
		// Nothing starts the training for us: the waiting screen names
		// VRAMSCOPE_SOCKET when the hook's default path is not ours.
		opts = append(opts, tui.WithTrainingDefault(trainingDefault()))
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
