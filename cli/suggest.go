package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A typo of a command or a flag gets a "did you mean", on the
// one line the error is.

// rootArgs is the root command's Args: none, and an unknown command gets
// the nearest ones.
func rootArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%s (vramscope --help lists the commands)", msg)
}

// flagError adds the nearest flag names to an unknown flag's error.
func flagError(cmd *cobra.Command, err error) error {
	name, ok := unknownFlag(err.Error())
	if !ok {
		return err
	}
	var near []string
	visit := func(f *pflag.Flag) {
		if !f.Hidden && distance(name, f.Name) <= max(2, len(name)/3) {
			near = append(near, "--"+f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if len(near) == 0 {
		return fmt.Errorf("%w (%s --help lists the flags)", err, cmd.CommandPath())
	}
	return fmt.Errorf("%w; did you mean %s?", err, strings.Join(near, " or "))
}

// unknownFlag is the name in pflag's "unknown flag: --name" (or
// "unknown shorthand flag: 'x' in -x").
func unknownFlag(msg string) (string, bool) {
	const long = "unknown flag: --"
	if i := strings.Index(msg, long); i >= 0 {
		name := msg[i+len(long):]
		if j := strings.IndexAny(name, " ="); j >= 0 {
			name = name[:j]
		}
		return name, name != ""
	}
	return "", false
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
