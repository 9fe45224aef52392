package report

import (
	"bytes"
	"testing"
)

// WriteJSON writes one process at a time; its bytes are those of the
// whole report encoded at once, with several processes and with none.
func TestWriteJSONIsTheWholeEncoding(t *testing.T) {
	for _, path := range []string{"../testdata/h100/clients.jsonl.gz", "../testdata/h100/s001.jsonl.gz"} {
		rep := Build(loadRecording(t, path))
		if path == "../testdata/h100/clients.jsonl.gz" && len(rep.Processes) < 2 {
			t.Fatalf("%s: %d processes, want several", path, len(rep.Processes))
		}
		for _, r := range []*Report{rep, {Schema: rep.Schema}} {
			var streamed, whole bytes.Buffer
			if err := r.WriteJSON(&streamed); err != nil {
				t.Fatal(err)
			}
			if err := encodeIndented(&whole, r, ""); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(streamed.Bytes(), whole.Bytes()) {
				t.Errorf("%s (%d processes): WriteJSON differs from the whole encoding", path, len(r.Processes))
			}
		}
	}
}
