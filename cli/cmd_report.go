package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

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
			return runReport(args[0], asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (schema vramscope.report/v1)")
	return cmd
}

func runReport(path string, asJSON bool, stdout, stderr io.Writer) error {
	store := session.New()
	_, warnings, err := record.ReadAll(path, store.Apply)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "vramscope: warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	rep := report.Build(store)
	if asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}
