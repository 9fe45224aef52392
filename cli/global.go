package cli

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vramscope/vramscope/probe"
)

// The flag groups several commands share, defined once (restic's
// global.go). A command's own flags stay in its cmd_<name>.go.

// addSocketFlag registers --socket for a monitor that listens on the
// default socket (the live view, record).
func addSocketFlag(f *pflag.FlagSet, socket *string) {
	f.StringVar(socket, "socket", "", "socket path (default $VRAMSCOPE_SOCKET, $XDG_RUNTIME_DIR/vramscope/vramscope.sock or /tmp/vramscope-$UID/vramscope.sock)")
}

// addDebugFlag registers --debug: the log file, since the TUI owns the
// terminal (the live view, replay, demo).
func addDebugFlag(f *pflag.FlagSet, path *string) {
	f.StringVar(path, "debug", "", "write a debug log to this file")
}

func addNVMLFlags(cmd *cobra.Command, dev, proc *time.Duration) {
	cmd.Flags().DurationVar(dev, "nvml-interval", probe.DefaultDeviceInterval, "NVML device memory interval (floor 100ms)")
	cmd.Flags().DurationVar(proc, "nvml-process-interval", probe.DefaultProcessInterval, "NVML process list interval (floor 100ms)")
}

// addPrometheusFlag registers --prometheus on a command that monitors
// (the live view, record, run).
func addPrometheusFlag(cmd *cobra.Command, addr *string) {
	cmd.Flags().StringVar(addr, "prometheus", "", "serve Prometheus metrics on this address (host:port, e.g. 127.0.0.1:9840) at /metrics")
}
