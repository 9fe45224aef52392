package cli

import (
	"io"
	"strings"
	"testing"
)

// Typos of commands and flags got no "did you mean". The root
// command, as main runs it.
func TestTyposGetADidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reprot", "x.jsonl"}, `unknown command "reprot" for "vramscope"; did you mean report?`},
		{[]string{"report", "--jsno", "x.jsonl"}, "unknown flag: --jsno; did you mean --json?"},
		{[]string{"--sokcet", "/tmp/x.sock"}, "unknown flag: --sokcet; did you mean --socket?"},
		{[]string{"demo", "--zzzzzz"}, "unknown flag: --zzzzzz (vramscope demo --help lists the flags)"},
	} {
		root := NewRootCmd(nil)
		root.SetArgs(tc.args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("vramscope %v: %v, want one line with %q", tc.args, err, tc.want)
		}
	}
}

// Summaries said "1 clients".
func TestSummaryCountsInTheSingular(t *testing.T) {
	for n, want := range map[int]string{0: "0 clients", 1: "1 client", 2: "2 clients"} {
		if got := count(n, "client"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
