package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/plot"
)

func TestExportCommand(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runExport("testdata/h100/s001.jsonl.gz", "parquet", "", false, &stdout, &stderr)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "perfetto or csv") {
		t.Fatalf("unknown format: %v", err)
	}
	out := filepath.Join(dir, "t.json")
	if err := runExport("testdata/h100/s001.jsonl.gz", "perfetto", out, false, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(b, []byte(`{"traceEvents":[`)) {
		t.Fatalf("trace file: %v %.40q", err, b)
	}
	gz := filepath.Join(dir, "t.json.gz")
	if err := runExport("testdata/h100/s001.jsonl.gz", "perfetto", gz, false, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(gz); err != nil {
		t.Fatal(err)
	} else {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("-o .gz is not gzip: %v", err)
		}
		b, _ := io.ReadAll(zr)
		f.Close()
		if !bytes.HasPrefix(b, []byte(`{"traceEvents":[`)) {
			t.Fatalf("gzipped trace: %.40q", b)
		}
	}
	if err := runExport("testdata/h100/s001.jsonl.gz", "csv", "", false, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(stdout.String(), "\n"); lines != 31 {
		t.Fatalf("csv on stdout: %d lines, want 31", lines)
	}
	// A missing recording is one line, and leaves no output file behind.
	missing := filepath.Join(dir, "missing.csv")
	err = runExport(filepath.Join(dir, "nope.jsonl"), "csv", missing, false, &stdout, &stderr)
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("an output file was created for a recording that could not be read")
	}
}

func TestPlotAndDiffCommands(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := runPlot("testdata/h100/live.jsonl.gz", filepath.Join(dir, "x.gif"), "", plotOptsDefault(), false, &stdout, &stderr); err == nil {
		t.Fatal("plot to .gif did not fail")
	}
	png := filepath.Join(dir, "live.png")
	if err := runPlot("testdata/h100/live.jsonl.gz", png, "#1", plotOptsDefault(), false, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(png); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatal("not a PNG")
	}
	if err := runDiff("testdata/h100/live.jsonl.gz", "testdata/h100/live.jsonl.gz", "#0", "pid 5", false, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Fatalf("unknown process: %v", err)
	}
	stdout.Reset()
	if err := runDiff("testdata/h100/live.jsonl.gz", "testdata/h100/live.jsonl.gz", "692", "rank:0", false, &stdout, &stderr); err == nil {
		t.Fatal("rank:0 in a recording without ranks was found")
	}
	if err := runDiff("testdata/h100/live.jsonl.gz", "testdata/h100/live.jsonl.gz", "692", "728", true, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), `"schema": "vramscope.diff/v1"`) {
		t.Fatalf("diff --json:\n%s", stdout.String())
	}
}

func plotOptsDefault() plot.Options { return plot.Options{} }
