package cli

import (
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/diff"
)

func newDiffCmd() *cobra.Command {
	var asJSON bool
	var procA, procB string
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two recordings step by step and phase by phase",
		Long: `diff compares two recordings, for example before and after activation
checkpointing or a batch-size change. Processes are paired by rank (else in
the order they started), steps by index and phases by name. It prints the
per-phase peak deltas, the steady-peak change and the anatomy layers that
moved (B − A). --process-a and --process-b pick one process of a file by
pid, rank (rank:N), hook session id or position (#N, from 0), so two
processes of one recording can be compared too. docs/diff.md has details.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(args[0], args[1], procA, procB, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (schema "+diff.Schema+")")
	cmd.Flags().StringVar(&procA, "process-a", "", "the process of A to compare: "+processSelectors)
	cmd.Flags().StringVar(&procB, "process-b", "", "the process of B to compare: "+processSelectors)
	return cmd
}

func runDiff(pathA, pathB, procA, procB string, asJSON bool, stdout, stderr io.Writer) error {
	a, err := loadExport(pathA, stderr)
	if err != nil {
		return err
	}
	b, err := loadExport(pathB, stderr)
	if err != nil {
		return err
	}
	nameA, nameB := filepath.Base(pathA), filepath.Base(pathB)
	var res diff.Result
	if procA == "" && procB == "" {
		res = diff.Compare(a, b, nameA, nameB)
	} else {
		pa, err := pickProcess(a, procA, pathA)
		if err != nil {
			return err
		}
		pb, err := pickProcess(b, procB, pathB)
		if err != nil {
			return err
		}
		res = diff.Result{Schema: diff.Schema, A: nameA, B: nameB, Pairs: []diff.Pair{diff.ComparePair(a, pa, b, pb)}}
	}
	if asJSON {
		return res.WriteJSON(stdout)
	}
	return res.WriteText(stdout)
}
