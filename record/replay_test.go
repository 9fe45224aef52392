package record

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// OpenReplay streams a recording, plain, gzip or torn, as the whole-file
// read paced by one session.Pacer does, and collects the reader's warnings
// once a read reaches the end.
func TestOpenReplayStreams(t *testing.T) {
	dir := filepath.Join("..", "testdata", "recordings")
	small, err := os.ReadFile(filepath.Join(dir, "small.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(t.TempDir(), "small.jsonl.gz")
	f, err := os.Create(gz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write(small)
	zw.Close()
	f.Close()
	for _, tc := range []struct {
		path, warning string
	}{
		{filepath.Join(dir, "small.jsonl"), ""},
		{gz, ""},
		{filepath.Join(dir, "torn.jsonl"), "torn last line"},
	} {
		var want []session.Event
		if _, _, err := ReadAll(tc.path, func(ev session.Event) { want = append(want, ev) }); err != nil {
			t.Fatal(err)
		}
		var pacer session.Pacer
		for i := range want {
			pacer.Pace(&want[i])
		}
		_, open, warned, err := OpenReplay(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		for pass := 0; pass < 2; pass++ { // a seek back opens it again
			s, err := open()
			if err != nil {
				t.Fatal(err)
			}
			var got []session.Event
			for {
				ev, err := s.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			s.Close()
			if len(got) != len(want) {
				t.Fatalf("%s: %d events, want %d", tc.path, len(got), len(want))
			}
			for i := range got {
				if !got[i].At.Equal(want[i].At) || (got[i].Msg == nil) != (want[i].Msg == nil) {
					t.Fatalf("%s: event %d at %v, want %v", tc.path, i, got[i].At, want[i].At)
				}
			}
		}
		w := strings.Join(warned.Lines(), "; ")
		if (tc.warning == "") != (w == "") || !strings.Contains(w, tc.warning) {
			t.Errorf("%s: warnings %q, want %q", tc.path, w, tc.warning)
		}
	}
}
