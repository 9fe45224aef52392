package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// TestEachMatchesNext: the parallel reader hands over the same events in
// the same order, with the same warnings, as Next, for every fixture and
// for a file with bad, empty and torn lines spread over several batches.
func TestEachMatchesNext(t *testing.T) {
	var b strings.Builder
	small, err := os.ReadFile("../testdata/recordings/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(small)), "\n")
	b.WriteString(lines[0] + "\n")
	for i := 0; i < 3000; i++ {
		switch i % 997 {
		case 5:
			b.WriteString("not json\n")
		case 6:
			b.WriteString("\n")
		}
		b.WriteString(lines[1+i%(len(lines)-1)] + "\n")
	}
	b.WriteString(`{"t":17637948`) // torn
	srcs := map[string]func() (*Reader, error){
		"mixed": func() (*Reader, error) { return NewReader("mixed", strings.NewReader(b.String())) },
	}
	for _, f := range []string{"small.jsonl", "torn.jsonl", "cpu_torch113.jsonl.gz", "hostile_text.jsonl"} {
		srcs[f] = func() (*Reader, error) { return Open("../testdata/recordings/" + f) }
	}
	for name, open := range srcs {
		var want []session.Event
		r := must(open())
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Msg != nil {
				ev.Msg.Raw = nil
			}
			want = append(want, ev)
		}
		wantWarn := r.Warnings()
		r.Close()
		var got []session.Event
		r = must(open())
		if err := r.Each(func(ev session.Event) { got = append(got, ev) }); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if len(got) != len(want) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Each gave %d events, Next %d (or they differ)", name, len(got), len(want))
		}
		if !reflect.DeepEqual(r.Warnings(), wantWarn) {
			t.Errorf("%s: Each warned %q, Next %q", name, r.Warnings(), wantWarn)
		}
		// Fold hands each message and its Mem only for the call: copy both
		// there (the batch that holds them is reused).
		got = got[:0]
		r = must(open())
		if err := r.Fold(func(ev session.Event) {
			if ev.Msg != nil {
				m := *ev.Msg
				if m.Mem != nil {
					mem := *m.Mem
					m.Mem = &mem
				}
				ev.Msg = &m
			}
			got = append(got, ev)
		}); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if len(got) != len(want) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Fold gave %d events, Next %d (or they differ)", name, len(got), len(want))
		}
		if !reflect.DeepEqual(r.Warnings(), wantWarn) {
			t.Errorf("%s: Fold warned %q, Next %q", name, r.Warnings(), wantWarn)
		}
	}
}

// A store folded from a recording is the store read from it: it keeps no
// message, only what messages point to.
func TestFoldedStoreIsTheReadStore(t *testing.T) {
	for _, f := range []string{"small.jsonl", "cpu_torch113.jsonl.gz", "../h100/s001.jsonl.gz", "../h100/clients.jsonl.gz"} {
		read, folded := session.New(), session.New()
		if _, _, err := ReadAll("../testdata/recordings/"+f, read.Apply); err != nil {
			t.Fatal(err)
		}
		if _, _, err := FoldAll("../testdata/recordings/"+f, folded.Apply); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(read.Processes(), folded.Processes()) || !reflect.DeepEqual(read.GPUs(), folded.GPUs()) {
			t.Errorf("%s: the folded store differs from the read one", f)
		}
	}
	// Censuses, copied out of their messages: the hook's two census lines
	// after small.jsonl's hello.
	small, err := os.ReadFile("../testdata/recordings/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct{ Census []string }
	if b, err := os.ReadFile("../testdata/protocol/census.json"); err != nil || json.Unmarshal(b, &fixture) != nil {
		t.Fatalf("census fixture: %v", err)
	}
	lines := strings.SplitN(string(small), "\n", 4)
	rec := lines[0] + "\n" + lines[2] + "\n"
	for i, c := range fixture.Census {
		rec += fmt.Sprintf(`{"t":1763794801.%d,"conn":1,"msg":%s}`, i, c) + "\n"
	}
	path := filepath.Join(t.TempDir(), "census.jsonl")
	if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	read, folded := session.New(), session.New()
	if _, _, err := ReadAll(path, read.Apply); err != nil {
		t.Fatal(err)
	}
	if _, _, err := FoldAll(path, folded.Apply); err != nil {
		t.Fatal(err)
	}
	ps := folded.Processes()
	if len(ps) != 1 || len(ps[0].Censuses) != len(fixture.Census) {
		t.Fatalf("folded %d processes, want 1 with %d censuses", len(ps), len(fixture.Census))
	}
	if !reflect.DeepEqual(read.Processes(), ps) {
		t.Error("the folded censuses differ from the read ones")
	}
}

func must(r *Reader, err error) *Reader {
	if err != nil {
		panic(err)
	}
	return r
}
