// Command vramscope is a live GPU-memory monitor for PyTorch training.
//
// main only wires: it parses flags (cobra), builds the sources (socket
// server, NVML sampler, demo, recording), picks live or replay, and starts
// the program. The work lives in the packages.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/vramscope/vramscope/launch"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var exit *launch.ExitError
		if errors.As(err, &exit) { // `run` passes its command's exit code on
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "vramscope:", err)
		os.Exit(1)
	}
}
