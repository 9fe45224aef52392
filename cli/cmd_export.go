package cli

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/export/csv"
	"github.com/vramscope/vramscope/export/perfetto"
	"github.com/vramscope/vramscope/internal/safefs"
	"github.com/vramscope/vramscope/session"
)

func newExportCmd() *cobra.Command {
	var format, out string
	var force bool
	cmd := &cobra.Command{
		Use:   "export FILE --format perfetto|csv [-o OUT]",
		Short: "Export a recording as a Perfetto trace or a step × phase CSV",
		Long: `export writes a recording in another tool's format:

  perfetto  Chrome trace-event JSON: phases as slices per process and rank,
            allocated / max allocated / reserved / NVML as counter tracks,
            marks as instant events. Open it in ui.perfetto.dev or
            chrome://tracing.
  csv       the step × phase table, one row per step and phase, bytes and
            seconds; pandas.read_csv reads it with no options.

Without -o it writes to stdout; an OUT ending in .gz is gzipped. Like a
recording, OUT is created 0600 (it carries host names and argv), and an
existing OUT, or a symlink there, is refused unless --force, which replaces
the file or the link itself, never what a link points at.
docs/export.md describes both layouts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(args[0], format, out, force, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "perfetto or csv")
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (default stdout)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output file")
	_ = cmd.MarkFlagRequired("format")
	return cmd
}

func runExport(path, format, out string, force bool, stdout, stderr io.Writer) error {
	var write func(io.Writer, *session.Store) error
	switch strings.ToLower(format) {
	case "perfetto":
		meta := map[string]string{"recording": filepath.Base(path), "exported_by": "vramscope " + buildVersion()}
		write = func(w io.Writer, s *session.Store) error { return perfetto.Write(w, s, meta) }
	case "csv":
		write = csv.Write
	default:
		return fmt.Errorf("unknown export format %q: want perfetto or csv", format)
	}
	store, err := loadExport(path, stderr)
	if err != nil {
		return err
	}
	return writeOut(out, force, stdout, func(w io.Writer) error {
		if !strings.HasSuffix(out, ".gz") {
			return write(w, store)
		}
		// Perfetto and chrome://tracing open gzipped traces as they are.
		zw := gzip.NewWriter(w)
		if err := write(zw, store); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
		return nil
	})
}

// loadExport reads a whole recording for an exporter, printing the
// reader's warnings (what was skipped) to stderr.
func loadExport(path string, stderr io.Writer) (*session.Store, error) {
	store, _, warnings, err := export.Load(path)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "vramscope: warning: %s\n", w)
	}
	return store, err
}

// writeOut writes to the file out, or to stdout when out is "" or "-". A
// file that could not be written whole is removed, never left half done.
func writeOut(out string, force bool, stdout io.Writer, write func(io.Writer) error) error {
	if out == "" || out == "-" {
		return write(stdout)
	}
	f, err := createOut(out, force)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(out)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(out)
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// createOut creates an output file the way record creates a recording:
// 0600, as it carries host names and argv, and never over an existing
// file or through a symlink (O_EXCL does not follow one). export -o and
// plot -o followed a planted symlink and truncated its target. With force an
// existing file or symlink is removed first,
// the link itself and not its target; a directory is never removed.
func createOut(out string, force bool) (*os.File, error) {
	if force {
		if fi, err := os.Lstat(out); err == nil && !fi.IsDir() {
			if err := os.Remove(out); err != nil {
				return nil, fmt.Errorf("create %s: %w", out, err)
			}
		}
	}
	f, err := safefs.OpenFile(out, safefs.Exclusive, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: the file (or a symlink) exists; choose another name, remove it, or pass --force", out)
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", out, err)
	}
	return f, nil
}
