package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

func newDiffCmd() *cobra.Command {
	var asJSON bool
	var procA, procB string
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two recordings, or two jobs rank by rank, step by step and phase by phase",
		Long: `diff compares two recordings, for example before and after activation
checkpointing or a batch-size change. Processes are paired by rank (else in
the order they started), steps by index and phases by name. It prints the
per-phase peak deltas, the steady-peak change and the anatomy layers that
moved (B − A). --process-a and --process-b pick one process of a file by
pid, rank (rank:N), hook session id or position (#N, from 0), so two
processes of one recording can be compared too. A or B may be a directory:
its recordings (*.jsonl, *.jsonl.gz; one per node of a job) are read as one
job, so two jobs are compared rank by rank. docs/diff.md has details.`,
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
	a, err := loadSide(pathA, stderr)
	if err != nil {
		return err
	}
	b, err := loadSide(pathB, stderr)
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

// loadSide reads one side of a diff: a recording, or a directory of a
// job's recordings into one store.
func loadSide(path string, stderr io.Writer) (*session.Store, error) {
	paths, err := recordingPaths([]string{path})
	if err != nil {
		return nil, err
	}
	if len(paths) == 1 && paths[0] == path {
		return loadExport(path, stderr)
	}
	store, warnings, err := export.LoadMany(paths)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "vramscope: warning: %s\n", textesc.String(w))
	}
	return store, err
}
