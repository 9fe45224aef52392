package report

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// A streamed report writes the bytes of the built one, as text and JSON,
// and gives the job view the same rows, for every fixture recording and
// for an empty store.
func TestStreamWritesWhatBuildWrites(t *testing.T) {
	stores := fixtureStores(t)
	stores["empty"] = session.New()
	for name, s := range stores {
		built, streamed := Build(s), Stream(s)
		for _, write := range []struct {
			kind string
			fn   func(*Report, *bytes.Buffer) error
		}{
			{"text", func(r *Report, b *bytes.Buffer) error { return r.WriteText(b) }},
			{"json", func(r *Report, b *bytes.Buffer) error { return r.WriteJSON(b) }},
		} {
			var want, got bytes.Buffer
			if err := write.fn(built, &want); err != nil {
				t.Fatal(err)
			}
			if err := write.fn(streamed, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want.Bytes(), got.Bytes()) {
				t.Errorf("%s: streamed %s differs from the built report", name, write.kind)
			}
		}
		if !reflect.DeepEqual(RanksOf(name, built), RanksOf(name, streamed)) {
			t.Errorf("%s: streamed ranks differ from the built report's", name)
		}
	}
}
