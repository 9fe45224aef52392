package cli

import (
	"fmt"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/internal/safefs"
)

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
    vramscope.watch(model, optimizer)

Or, with no code change: vramscope run -- python train.py`,
		Args:          rootArgs, // none; a typo of a command gets "did you mean"
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
		f, err := safefs.OpenFile(cpuProfile, safefs.Truncate, 0o600)
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
	// --version prints what `vramscope version` prints.
	root.SetVersionTemplate("{{.Version}}")
	root.Version = build().String()
	root.SetFlagErrorFunc(flagError) // subcommands inherit it
	root.SuggestionsMinimumDistance = 2
	live.register(root)
	root.AddCommand(newRecordCmd(), newReportCmd(), newReplayCmd(), newDemoCmd(), newDevicesCmd(),
		newVersionCmd(), newRunCmd(), newDoctorCmd())
	root.AddCommand(newExportCmd(), newDiffCmd(), newPlotCmd(), newCensusCmd())
	return root
}
