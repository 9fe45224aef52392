package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/report"
)

// recordingPaths expands the arguments of report and diff: a file stays
// as it is; a directory stands for the recordings in it (*.jsonl,
// *.jsonl.gz, sorted; not its subdirectories).
func recordingPaths(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			out = append(out, a) // reading it says what is wrong
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", a, err)
		}
		var found []string
		for _, e := range ents {
			if n := e.Name(); e.Type().IsRegular() && (strings.HasSuffix(n, ".jsonl") || strings.HasSuffix(n, ".jsonl.gz")) {
				found = append(found, filepath.Join(a, n))
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no recordings (*.jsonl, *.jsonl.gz) in it", a)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// runJobReport reads each recording into its own report (the single
// report's entry point), keeps one row per process, and prints the job
// view. Recordings are read on every core, a store at a time per core, so
// memory is a few recordings' whatever their number.
func runJobReport(paths []string, asJSON bool, stdout, stderr io.Writer) error {
	rows := make([][]report.Rank, len(paths))
	errs := make([]error, len(paths))
	var mu sync.Mutex // serializes the warnings
	warn := &lockedWriter{w: stderr, mu: &mu}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rep, err := loadReport(paths[i], textesc.String(paths[i])+": ", warn)
				if err != nil {
					errs[i] = err
					continue
				}
				rows[i] = report.RanksOf(paths[i], rep)
			}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	v := report.NewJobView()
	for i, p := range paths {
		if errs[i] != nil {
			return errs[i]
		}
		v.Add(p, rows[i])
	}
	v.Finish()
	if asJSON {
		return v.WriteJSON(stdout)
	}
	return v.WriteText(stdout)
}

// lockedWriter lets the readers' goroutines share stderr a line at a time.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
