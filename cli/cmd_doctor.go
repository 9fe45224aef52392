package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/doctor"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/launch"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/probe/nvmlprobe"
)

func newDoctorCmd() *cobra.Command {
	var socket, python string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say why nothing shows up: socket paths and permissions, the monitor, NVML, torch and the hook",
		Long: `doctor checks, from this shell's environment, the socket the monitor and
the hook would each use (path, directory and socket permissions, whether a
monitor listens there, and whether one listens on a path a job started
elsewhere would use), what --python reports for torch, CUDA and the hook,
and NVML's status. It changes nothing. It exits 1 when something it found
stops the hook's messages from reaching a monitor (docs/install.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := doctor.Run(cmd.Context(), doctor.Options{
				Socket: socket, UID: os.Getuid(), Python: python,
				NVML: nvmlStatus, Protocol: ipc.Version,
			})
			fmt.Fprintf(cmd.OutOrStdout(), "vramscope %s (protocol v%d)\n\n", buildVersion(), ipc.Version)
			if err := rep.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			if rep.Failed() {
				return &launch.ExitError{Code: 1, Desc: "doctor found problems"}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the monitor's socket path, as given to the monitor's --socket (default: as the monitor would choose)")
	cmd.Flags().StringVar(&python, "python", "python3", "the Python the training runs with (\"\" skips the Python checks)")
	return cmd
}

// nvmlStatus is NVML's state in one line, and whether it works.
func nvmlStatus() (string, bool) {
	info, err := nvmlprobe.Describe()
	if reason, ok := probe.Unavailable(err); ok {
		return "unavailable: " + reason, false
	}
	if err != nil {
		return "error: " + err.Error(), false
	}
	var names []string
	for _, d := range info.Devices {
		names = append(names, d.Device.Name)
	}
	return fmt.Sprintf("driver %s, NVML %s, %d GPU(s): %s", info.Driver, info.NVML, len(info.Devices), strings.Join(names, ", ")), true
}
