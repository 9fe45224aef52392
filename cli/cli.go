// Package cli holds vramscope's commands: one file per command
// (cmd_<name>.go), each owning its flags, its help and its run function.
// The flag groups several commands share are defined once in global.go.
package cli

import (
	"context"
	"io/fs"

	"github.com/spf13/cobra"
)

// NewRootCmd returns the vramscope command with every subcommand. hook is
// the tree that holds the hook package at pyhook/vramscope, which `vramscope
// run` writes for the child Python.
func NewRootCmd(hook fs.FS) *cobra.Command {
	hookTree = hook
	return newRootCmd()
}

// orBackground is ctx, or the background context when ctx is nil.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
