package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/tui"
)

// The recording reader is the replay's stream, and it finds its own end.
var _ tui.ReplayEnder = (*record.PacedReader)(nil)

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
	hdr, open, warned, err := record.OpenReplay(path)
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
