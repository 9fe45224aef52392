package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/session"
)

func newReportCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report FILE",
		Short: "Summarise a recording: step × phase table, anatomy, diagnosis",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			batchGC()
			return runReport(args[0], asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (schema vramscope.report/v1)")
	return cmd
}

// batchGCPercent is report's garbage-collector target: a one-shot batch
// read trades heap for collector time. On a 1M-step recording (bench/million,
// 2.5 GB, 2 idle cores) GOGC 100 took 10.4-10.7 s and 78 MB; 200 took 9.3 s
// and 105 MB, inside the 10 s and 150 MB a report of a
// million steps may take (400: 8.3 s but 175 MB).
const batchGCPercent = 200

// batchGC sets batchGCPercent unless the user chose GOGC.
func batchGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(batchGCPercent)
	}
}

func runReport(path string, asJSON bool, stdout, stderr io.Writer) error {
	store := session.New()
	hdr, warnings, err := record.FoldAll(path, store.Apply)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "vramscope: warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	rep := report.Build(store)
	rep.Begins = textesc.String(hdr.Begins) // a file's text: no byte of it reaches the terminal raw
	if asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}
