// Command vramscope is a live GPU-memory monitor for PyTorch training.
//
// main only wires: it parses flags (cobra), builds the sources (socket
// server, NVML sampler, demo, recording), picks live or replay, and starts
// the program. The work lives in the packages.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "vramscope:", err)
		os.Exit(1)
	}
}
