package report

import (
	"errors"
	"io"
	"testing"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// loadRecording reads a recording under testdata into a new store, the way
// `vramscope report FILE` does.
func loadRecording(t testing.TB, path string) *session.Store {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := session.New()
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return s
		}
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(ev)
	}
}
