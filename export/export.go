// Package export loads a recording into a session.Store for the exporters
// (export/perfetto, export/csv, plot, diff): the same record.Reader and
// store a replay uses, with limits wide enough that a file is exported
// whole rather than as the bounded window the live view keeps.
package export

import (
	"fmt"
	"math"
	"time"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// RawWindow is how much of a recording keeps every point of every series.
// Beyond it (a recording longer than a day) older points are kept as the
// store's min/max buckets, so peaks survive but fine detail does not.
const RawWindow = 24 * time.Hour

// EveryProcess keeps every process of a recording. A recording read after
// the fact holds processes that are all gone by its end, and the live
// monitor's bound on gone processes (session.DefaultMaxGoneBytes) would
// drop the first ranks of a node from a report, a diff or an export.
func EveryProcess() []session.Option {
	return []session.Option{session.WithMaxGoneBytes(math.MaxInt), session.WithMaxProcesses(math.MaxInt)}
}

// StoreOptions are the store limits an export wants: every process, every
// point of a day-long recording, every span and step row of a long one.
func StoreOptions() []session.Option {
	return append(EveryProcess(),
		session.WithRawWindow(RawWindow),
		session.WithMaxSpans(2_000_000),
		session.WithMaxSteps(200_000),
		session.WithMaxStepPeaks(200_000),
	)
}

// Load reads a recording into a new store built with StoreOptions (and
// opts after them). It returns the file's header and the reader's warnings
// (a torn last line, skipped bad lines): what it could read is kept.
func Load(path string, opts ...session.Option) (*session.Store, record.Header, []string, error) {
	r, err := record.Open(path)
	if err != nil {
		return nil, record.Header{}, nil, err
	}
	defer r.Close()
	store := session.New(append(StoreOptions(), opts...)...)
	if err := r.Each(store.Apply); err != nil {
		return store, r.Header(), r.Warnings(), fmt.Errorf("read %s: %w", path, err)
	}
	return store, r.Header(), r.Warnings(), nil
}

// LoadMany reads several recordings, one per node of a job, into one new
// store (a job's ranks side by side, as diff pairs them by rank). Each
// file's connections are told apart from the others' (they number theirs
// from 1 each). Warnings name their file.
func LoadMany(paths []string, opts ...session.Option) (*session.Store, []string, error) {
	store := session.New(append(StoreOptions(), opts...)...)
	var warnings []string
	for i, path := range paths {
		r, err := record.Open(path)
		if err != nil {
			return store, warnings, err
		}
		file := uint64(i+1) << 40
		err = r.Each(func(ev session.Event) {
			if ev.Conn != 0 {
				ev.Conn |= file
			}
			store.Apply(ev)
		})
		for _, w := range r.Warnings() {
			warnings = append(warnings, path+": "+w)
		}
		r.Close()
		if err != nil {
			return store, warnings, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return store, warnings, nil
}
