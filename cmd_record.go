package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

type recordFlags struct {
	out       string
	socket    string
	duration  time.Duration
	nvmlEvery time.Duration
	procEvery time.Duration
}

func newRecordCmd() *cobra.Command {
	var o recordFlags
	cmd := &cobra.Command{
		Use:   "record -o FILE",
		Short: "Record training runs to a file without the TUI",
		Long: `record listens on the socket like the live view, writes every hook message
and NVML sample to FILE (gzip when FILE ends in .gz), and stops on Ctrl-C,
SIGTERM or when --duration has passed. It prints a one-line summary.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecord(cmd.Context(), o, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "recording file (.jsonl or .jsonl.gz)")
	cmd.Flags().StringVar(&o.socket, "socket", "", "socket path (default $VRAMSCOPE_SOCKET, $XDG_RUNTIME_DIR/vramscope/vramscope.sock or /tmp/vramscope-$UID/vramscope.sock)")
	cmd.Flags().DurationVar(&o.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	addNVMLFlags(cmd, &o.nvmlEvery, &o.procEvery)
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func addNVMLFlags(cmd *cobra.Command, dev, proc *time.Duration) {
	cmd.Flags().DurationVar(dev, "nvml-interval", probe.DefaultDeviceInterval, "NVML device memory interval (floor 100ms)")
	cmd.Flags().DurationVar(proc, "nvml-process-interval", probe.DefaultProcessInterval, "NVML process list interval (floor 100ms)")
}

func runRecord(ctx context.Context, o recordFlags, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	return recordUntil(ctx, o, stderr, nil)
}

// recordUntil records until ctx is done; `vramscope run` calls it with a
// context that ends after the command. listening, when not nil, gets the
// socket path once the server listens.
func recordUntil(ctx context.Context, o recordFlags, stderr io.Writer, listening func(string)) error {
	logf := stderrLog(stderr)
	srv, err := ipc.Listen(ipc.WithSocketPath(o.socket), ipc.WithLogf(logf))
	if err != nil {
		return err
	}
	defer srv.Close()
	f := feed.New(feed.WithOpener(recorder(record.SourceLive)))
	if err := f.Start(o.out); err != nil {
		return err
	}
	sampler := openNVML()
	defer sampler.Close()
	polled := poll(ctx, sampler, f, logf, o.nvmlEvery, o.procEvery)
	served := serve(ctx, srv, f, logf)
	if listening != nil {
		listening(srv.Path())
	} else {
		fmt.Fprintf(stderr, "vramscope: recording to %s; listening on %s; %s; Ctrl-C to stop\n", o.out, srv.Path(), sampler.Status())
	}

	store := session.New()
	for {
		evs, err := f.Next(ctx)
		if err != nil {
			break
		}
		store.ApplyAll(evs)
	}
	srv.Close()
	<-served
	<-polled
	drain(f, store, 50*time.Millisecond)
	recorded := f.Recorded()
	recErr := f.Err()
	if err := f.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, summary(store, o.out, recorded))
	return recErr
}

// summary is the one line a headless run ends with.
func summary(s *session.Store, path string, events uint64) string {
	var steps int
	var dropped uint64
	for _, p := range s.Processes() {
		steps += len(p.StepPeaks())
		dropped += p.Stats.Dropped
	}
	size := "?"
	if fi, err := os.Stat(path); err == nil {
		size = session.Bytes(fi.Size()).Human()
	}
	return fmt.Sprintf("vramscope: %d clients, %d events, %d steps, %d lost, %d dropped by hooks, %d bad messages; wrote %s (%s)",
		len(s.Processes()), events, steps, s.Lost(), dropped, s.Errors, path, size)
}
