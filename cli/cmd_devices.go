package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/probe/nvmlprobe"
)

func newDevicesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "devices",
		Short: "List GPUs, driver and NVML versions and per-process memory",
		Long: `devices reads NVML once. Without NVML (no driver, library not found, no
permission) it prints one line saying why, and that training without an
NVIDIA GPU is still watched, and exits 0; it fails only on real errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDevices(cmd.OutOrStdout())
		},
	}
}

// cpuRunsWork ends the line of a machine without NVML: training on the
// CPU (or MPS, XPU) is still watched.
const cpuRunsWork = "training without an NVIDIA GPU is still watched: a CPU run through its host memory (RSS), MPS and XPU through torch"

func runDevices(w io.Writer) error {
	info, err := nvmlprobe.Describe()
	if reason, ok := probe.Unavailable(err); ok {
		_, werr := fmt.Fprintf(w, "%s%s; %s\n", probe.UnavailablePrefix, reason, cpuRunsWork)
		return werr
	}
	if len(info.Devices) > 0 || info.Driver != "" {
		if ferr := probe.FormatDevices(w, info); ferr != nil {
			return ferr
		}
	}
	if err != nil {
		return fmt.Errorf("read NVML: %w", err)
	}
	return nil
}
