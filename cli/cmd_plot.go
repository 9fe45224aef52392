package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/vramscope/vramscope/plot"
)

func newPlotCmd() *cobra.Command {
	var out, proc, title string
	var force bool
	var width, height float64
	cmd := &cobra.Command{
		Use:   "plot FILE -o run.svg",
		Short: "Draw a recording's memory chart as SVG, PNG or PDF",
		Long: `plot draws one process of a recording: allocated, reserved and the NVML
figure over time, the phases shaded, the warmup marked and the session peak
annotated, the picture to paste into an issue. The format follows -o's
extension (.svg, .png, .pdf). --process picks the process (pid, rank:N,
session id or #N); the default is the one with the highest allocated peak.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlot(args[0], out, proc, plot.Options{
				Width: vg.Length(width) * vg.Inch, Height: vg.Length(height) * vg.Inch, Title: title,
			}, force, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "picture file: .svg, .png or .pdf (created 0600; an existing one is refused)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing picture file (a symlink there is replaced, not followed)")
	cmd.Flags().StringVar(&proc, "process", "", "process to draw: "+processSelectors)
	cmd.Flags().StringVar(&title, "title", "", "title (default: file, process, device, pattern)")
	cmd.Flags().Float64Var(&width, "width", 10, "width in inches (PNG: 96 dpi)")
	cmd.Flags().Float64Var(&height, "height", 5, "height in inches")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func runPlot(path, out, proc string, o plot.Options, force bool, stdout, stderr io.Writer) error {
	format := strings.TrimPrefix(filepath.Ext(out), ".")
	if out == "-" || format == "" {
		return fmt.Errorf("plot: -o needs a file name ending in .svg, .png or .pdf, got %q", out)
	}
	store, err := loadExport(path, stderr)
	if err != nil {
		return err
	}
	p, err := plotProcess(store, proc, path)
	if err != nil {
		return err
	}
	o.Source = filepath.Base(path)
	return writeOut(out, force, stdout, func(w io.Writer) error { return plot.Write(w, format, store, p, o) })
}
