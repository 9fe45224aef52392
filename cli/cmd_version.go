package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/internal/buildinfo"
	"github.com/vramscope/vramscope/ipc"
)

// build is what this binary knows about itself (docs/install.md).
func build() buildinfo.Info { return buildinfo.Read(ipc.Version) }

// buildVersion is the short version recordings' headers carry.
func buildVersion() string { return build().Short() }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, revision, Go version, NVML support and protocol version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), build().String())
			return err
		},
	}
}

// toolName is the tool recordings' headers name.
func toolName() string { return "vramscope " + buildVersion() }
