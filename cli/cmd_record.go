package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/pipeline"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
	"github.com/vramscope/vramscope/tui"
)

type recordFlags struct {
	out       string
	socket    string
	duration  time.Duration
	nvmlEvery time.Duration
	procEvery time.Duration
	prom      string
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
	addSocketFlag(cmd.Flags(), &o.socket)
	cmd.Flags().DurationVar(&o.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	addNVMLFlags(cmd, &o.nvmlEvery, &o.procEvery)
	addPrometheusFlag(cmd, &o.prom)
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func runRecord(ctx context.Context, o recordFlags, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, tui.QuitSignals...)
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
	suspicion := pipeline.NewSuspicion(recordDir(o.out))
	srv, err := ipc.Listen(ipc.WithSocketPath(o.socket), ipc.WithLogf(logf), suspicion.ServerOption())
	if err != nil {
		return err
	}
	defer srv.Close()
	prom := newPromExport(o.prom)
	f := feed.New(append([]feed.Option{feed.WithOpener(pipeline.Recorder(toolName(), record.SourceLive)), suspicion.FeedOption()}, prom.feedOptions()...)...)
	if err := f.Start(o.out); err != nil {
		return err
	}
	if err := prom.start(ctx, logf); err != nil {
		return err
	}
	mon := pipeline.StartMonitor(ctx, srv, f, logf, o.nvmlEvery, o.procEvery)
	suspicion.Start(ctx, srv, f)
	defer mon.Close()
	if listening != nil {
		listening(srv.Path())
	} else {
		fmt.Fprintf(stderr, "vramscope: recording to %s; listening on %s; %s; Ctrl-C to stop\n", o.out, srv.Path(), mon.Sampler.Status())
	}

	store := session.New(session.WithLiveBounds())
	// The recording is checked at least every recordCheck, so a failure
	// found by the writer's background flush (a full disk) is reported with
	// no event to trigger it.
	var recErr error
	pipeline.Consume(ctx, f, store, recordCheck, func() bool { recErr = f.Err(); return recErr == nil })
	if recErr != nil {
		// Say it now, not after Ctrl-C: recording is all this command does.
		fmt.Fprintf(stderr, "vramscope: %v; stopping\n", recErr)
	}
	mon.Stop()
	pipeline.Drain(f, store, 50*time.Millisecond)
	recorded := f.Recorded()
	if recErr == nil {
		recErr = f.Err()
	}
	if err := f.Stop(); err != nil && recErr == nil {
		recErr = err
	}
	fmt.Fprintln(stderr, summary(store, o.out, recorded, f.Rejected()))
	return recErr
}

// recordCheck is how often a headless command looks at its recording.
const recordCheck = 250 * time.Millisecond

// summary is the one line a headless run ends with.
// bad is the feed's count of bad lines: the store sees only their
// rate-limited reports.
func summary(s *session.Store, path string, events, bad uint64) string {
	var steps int
	var dropped uint64
	for _, p := range s.Processes() {
		steps += p.StepCount()
		dropped += p.Stats.Dropped
	}
	size := "?"
	if fi, err := os.Stat(path); err == nil {
		size = session.Bytes(fi.Size()).Human()
	}
	// Clients counts the sessions the store forgot to stay bounded too (it
	// said "1024 clients" after 2,000); lost is what the hooks sent and the
	// monitor never got, apart from what its own view skipped when it fell
	// behind (the recording has those) and the connections it refused.
	return fmt.Sprintf("vramscope: %s, %s, %s, %d lost, %d dropped by hooks, %s, %d skipped by the view (recorded), %s; wrote %s (%s)",
		count(len(s.Processes())+s.Forgotten, "client"), count(int(events), "event"), count(steps, "step"), s.Lost(), dropped,
		count(int(s.Refused), "refused connection"), s.Skipped, count(int(max(bad, uint64(s.Errors))), "bad message"), path, size)
}

// count is "1 client", "2 clients" (summaries said "1 clients").
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// recordDir is the absolute directory of a recording path, where a hook
// writes its allocator history beside it ("" without a recording).
func recordDir(path string) string {
	if path == "" {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	return filepath.Dir(abs)
}
