package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/session"
)

func newReportCmd() *cobra.Command {
	var asJSON, asJob bool
	cmd := &cobra.Command{
		Use:   "report FILE... | DIR",
		Short: "Summarise a recording, or a job's recordings: step × phase table, anatomy, diagnosis; ranks, imbalance, leaks",
		Long: `report summarises one recording: per process the step × phase table, the
totals, the anatomy and the diagnosis.

Given several recordings (one per node of a job, in any order), or a
directory holding them (*.jsonl, *.jsonl.gz), it gives the job view instead:
every rank's need, steady peak, held memory and pattern, the imbalance (the
largest need against the median, which rank and which phase) and the ranks
that leak. --job gives the job view of one recording. docs/report.md has
both layouts.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			batchGC()
			paths, err := recordingPaths(args)
			if err != nil {
				return err
			}
			if len(paths) == 1 && !asJob {
				return runReport(paths[0], asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runJobReport(paths, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (schema vramscope.report/v1; the job view: "+report.JobSchema+")")
	cmd.Flags().BoolVar(&asJob, "job", false, "the job view (ranks, imbalance, leaks) even of one recording")
	return cmd
}

func runReport(path string, asJSON bool, stdout, stderr io.Writer) error {
	rep, err := loadReport(path, "", stderr)
	if err != nil {
		return err
	}
	if asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}

// loadReport reads one recording into its report, the entry point of a
// single report and of each recording of a job's. The report is written
// once, so it streams (report.Stream): each process is built as it is
// written. Its store has the report's bounds (session.WithReportBounds).
// Warnings go to stderr, after prefix.
func loadReport(path, prefix string, stderr io.Writer) (*report.Report, error) {
	store := session.New(append(export.EveryProcess(), session.WithReportBounds())...)
	hdr, warnings, err := record.FoldAll(path, store.Apply)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "vramscope: warning: %s%s\n", prefix, w)
	}
	if err != nil {
		return nil, err
	}
	rep := report.Stream(store)
	rep.Begins = textesc.String(hdr.Begins) // a file's text: no byte of it reaches the terminal raw
	return rep, nil
}
