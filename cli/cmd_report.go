package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

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
	hdr, warnings, err := record.ReadAll(path, store.Apply)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "vramscope: warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	rep := report.Build(store)
	if raw, ok := hdr.Meta["begins"]; ok {
		_ = json.Unmarshal(raw, &rep.Begins) // a header that is not a string says nothing
		rep.Begins = escapeLine(rep.Begins)
	}
	if asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}

// escapeLine shows control bytes of a file's text escaped: a header is
// read from a file, and no byte of a file reaches the terminal as it is.
func escapeLine(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
