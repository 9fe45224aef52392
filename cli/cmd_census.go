package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/ipc"
)

// censusTimeout bounds the exchange with the monitor.
const censusTimeout = 5 * time.Second

func newCensusCmd() *cobra.Command {
	var socket string
	var pid int
	cmd := &cobra.Command{
		Use:   "census --pid PID",
		Short: "Ask a running training process, through its monitor, for a census of its live tensors",
		Long: `census asks the monitor listening on the socket (the live view, record or
run) to ask the hook of process PID for a census of its live tensors: who
holds them, on which line, and the autograd graphs they keep alive. The
hook answers at the end of its next step; the census shows in the monitor's
census page (c) and diagnosis, and in its recording (docs/census.md). PID
may be the process's pid in any of its PID namespaces.`,
		Example: "  vramscope census --pid 4242",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pid <= 0 {
				return errors.New("--pid: the training process's pid is required")
			}
			path := socket
			if path == "" {
				path, _ = ipc.SocketPathFor(os.Getenv, os.Getuid())
			}
			a, err := ipc.AskMonitor(path, pid, censusTimeout)
			if err != nil {
				return err
			}
			if !a.OK {
				return fmt.Errorf("the monitor could not ask: %s", textesc.String(a.Text))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), "vramscope: "+textesc.String(a.Text))
			return err
		},
	}
	addSocketFlag(cmd.Flags(), &socket)
	cmd.Flags().IntVar(&pid, "pid", 0, "the training process's pid")
	return cmd
}
