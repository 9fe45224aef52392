package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// version is set by the build (-ldflags "-X main.version=..."); go install
// builds report their module version instead.
var version = "dev"

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

func newRootCmd() *cobra.Command {
	var live liveFlags
	root := &cobra.Command{
		Use:   "vramscope",
		Short: "Live GPU-memory monitor for PyTorch training",
		Long: `vramscope shows where a PyTorch training run's GPU memory goes, live:
allocated, max allocated and reserved per training phase, the driver's view
from NVML, a step-one warmup diagnosis and a memory anatomy.

Run it in a second terminal, then add to the training script:

    import vramscope
    vramscope.watch(model, optimizer)`,
		Version:       buildVersion(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLive(cmd.Context(), live)
		},
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile to this file (for performance reports)")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		return pprof.StartCPUProfile(f)
	}
	root.PersistentPostRun = func(*cobra.Command, []string) {
		if cpuProfile != "" {
			pprof.StopCPUProfile()
		}
	}
	live.register(root)
	root.AddCommand(newRecordCmd(), newReportCmd(), newReplayCmd(), newDemoCmd(), newDevicesCmd())
	root.AddCommand(newExportCmd(), newDiffCmd(), newPlotCmd())
	return root
}
