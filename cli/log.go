package cli

import (
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/vramscope/vramscope/internal/safefs"
)

// debugLog returns where the program logs: a file behind --debug, else
// nowhere (the TUI owns the terminal).
func debugLog(path string) (logf func(string, ...any), closer func(), err error) {
	if path == "" {
		return func(string, ...any) {}, func() {}, nil
	}
	f, err := safefs.OpenFile(path, safefs.Append, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open debug log: %w", err)
	}
	l := log.New(f, "", log.LstdFlags|log.Lmicroseconds)
	return l.Printf, func() { f.Close() }, nil
}

// stderrLog logs one line per problem to w, for headless commands.
func stderrLog(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "vramscope: "+format+"\n", args...)
	}
}

// logWriter adapts a logf to an io.Writer, one write a line.
type logWriter func(string, ...any)

func (l logWriter) Write(p []byte) (int, error) {
	l("%s", p)
	return len(p), nil
}
