// Command vramscope is a live GPU-memory monitor for PyTorch training.
//
// main only starts the program: the commands live in package cli, the work
// in the packages below it (docs/architecture.md).
package main

import (
	"embed"
	"errors"
	"fmt"
	"os"

	"github.com/vramscope/vramscope/cli"
	"github.com/vramscope/vramscope/launch"
)

// hookTree is the hook package, carried in the binary so `vramscope run`
// attaches the same version of the hook to any Python (docs/run.md).
//
//go:embed all:pyhook/vramscope
var hookTree embed.FS

func main() {
	if err := cli.NewRootCmd(hookTree).Execute(); err != nil {
		var exit *launch.ExitError
		if errors.As(err, &exit) { // `run` passes its command's exit code on
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "vramscope:", err)
		os.Exit(1)
	}
}
