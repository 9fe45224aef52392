package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// assertEvents compares events field by field; times by instant.
func assertEvents(t *testing.T, got, want []session.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		where := fmt.Sprintf("event %d", i)
		if !g.At.Equal(w.At) || g.Conn != w.Conn {
			t.Errorf("%s: at %v conn %d, want %v %d", where, g.At, g.Conn, w.At, w.Conn)
		}
		switch {
		case w.Msg != nil:
			if g.Msg == nil || !reflect.DeepEqual(*g.Msg, *w.Msg) {
				t.Errorf("%s: msg\n%+v\nwant\n%+v", where, g.Msg, w.Msg)
			}
		case w.GPU != nil:
			if g.GPU == nil {
				t.Fatalf("%s: no gpu sample", where)
			}
			gs, ws := *g.GPU, *w.GPU
			if !gs.At.Equal(ws.At) {
				t.Errorf("%s: gpu at %v, want %v", where, gs.At, ws.At)
			}
			gs.At, ws.At = time.Time{}, time.Time{}
			if !reflect.DeepEqual(gs, ws) {
				t.Errorf("%s: gpu\n%+v\nwant\n%+v", where, gs, ws)
			}
		default:
			if g.Note == nil || *g.Note != *w.Note {
				t.Errorf("%s: note %+v, want %+v", where, g.Note, w.Note)
			}
		}
	}
}

func writeAll(t *testing.T, path string, h Header, evs []session.Event, opts ...Option) *Writer {
	t.Helper()
	w, err := Create(path, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"rec.jsonl", "rec.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			evs := fixtureEvents(t)
			// A message without Raw is written with json.Marshal.
			m := *evs[3].Msg
			m.Raw = nil
			evs = append(evs, session.Event{At: time.UnixMicro(1763794801123456), Conn: 2, Msg: &m})
			w := writeAll(t, path, fixtureHeader(), evs)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			c := w.Counters()
			if c.Events != uint64(len(evs)) || c.Bytes <= 0 || c.FileBytes <= 0 {
				t.Errorf("counters %+v", c)
			}
			fi, _ := os.Stat(path)
			if fi.Size() != c.FileBytes {
				t.Errorf("FileBytes %d, file has %d", c.FileBytes, fi.Size())
			}
			if gz := strings.HasSuffix(name, ".gz"); gz != (c.FileBytes < c.Bytes) {
				t.Errorf("gzip %v but file %d bytes for %d uncompressed", gz, c.FileBytes, c.Bytes)
			}
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			h := r.Header()
			if h.Format != 1 || h.Version != "1.0" || h.Host != "trainbox" || h.Source != "live" ||
				!h.Created.Equal(fixtureHeader().Created) || string(h.Meta["fixture"]) != `"small"` {
				t.Errorf("header %+v", h)
			}
			got, warnings := readAll(t, path)
			if len(warnings) > 0 {
				t.Errorf("warnings %q", warnings)
			}
			m.Raw = got[len(got)-1].Msg.Raw // re-encoded, so compare the rest
			assertEvents(t, got, evs)
		})
	}
}

func TestTimePrecision(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(1763794800, 123456789), time.Unix(0, 0), time.Unix(0, 250000000), time.Unix(3999999999, 999999999),
	} {
		b := appendTime(nil, at)
		got, err := parseTime(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if want := at.Round(time.Microsecond); !got.Equal(want) {
			t.Errorf("%v -> %s -> %v, want %v", at, b, got, want)
		}
	}
	// Other writers (Python: repr of a float) may write fewer decimals or exponents.
	for in, want := range map[string]time.Time{
		"1763794800.25": time.Unix(1763794800, 250000000),
		"1.7637948e9":   time.Unix(1763794800, 0),
		"12":            time.Unix(12, 0),
	} {
		if got, err := parseTime([]byte(in)); err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestWriteRejectsBadEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := Create(path, Header{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, e := range []session.Event{
		{At: time.Now()},
		{At: time.Now(), Note: &session.Note{}, Msg: &ipc.Message{}},
	} {
		if err := w.Write(e); err == nil || !strings.Contains(err.Error(), "exactly one of") {
			t.Errorf("Write(%+v) = %v", e, err)
		}
	}
	if err := w.Write(session.Event{At: time.Now(), Note: &session.Note{Kind: "info", Text: "ok"}}); err != nil {
		t.Errorf("a good event after bad ones: %v", err)
	}
	if c := w.Counters(); c.Events != 1 {
		t.Errorf("counted %d events, want 1", c.Events)
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	os.WriteFile(path, []byte("keep me"), 0o644)
	if _, err := Create(path, Header{}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("got %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Fatalf("file changed: %q", b)
	}
	w, err := Create(path, Header{}, WithOverwrite())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// A live recording is compressed at gzip's fastest level (docs/format.md,
// "Compression"): the gzip header's XFL byte says so (RFC 1952: 4), and a
// standard reader reads it back whole.
func TestGzipIsTheFastestLevel(t *testing.T) {
	full, evs := gzipRecording(t)
	if len(full) < 10 || full[0] != 0x1f || full[1] != 0x8b {
		t.Fatalf("not gzip: % x", full[:min(len(full), 10)])
	}
	if full[8] != 4 {
		t.Errorf("XFL %d, want 4 (the fastest level)", full[8])
	}
	zr, err := gzip.NewReader(bytes.NewReader(full))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(data, []byte("\n")); lines != len(evs)+1 {
		t.Errorf("%d lines, want the header and %d events", lines, len(evs))
	}
}

// gzipRecording writes the fixture's events to a finished .gz recording and
// returns its bytes and the events.
func gzipRecording(t *testing.T) ([]byte, []session.Event) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.jsonl.gz")
	evs := fixtureEvents(t)
	w := writeAll(t, path, fixtureHeader(), evs)
	w.Close()
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return full, evs
}

func TestTornGzip(t *testing.T) {
	full, evs := gzipRecording(t)
	// Cut inside the deflate data and inside the trailer.
	for _, cut := range []int{len(full) - 4, len(full) / 2} {
		r, err := NewReader("cut", bytes.NewReader(full[:cut]))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("cut at %d: %v", cut, err)
			}
			n++
		}
		ws := strings.Join(r.Warnings(), "\n")
		if !strings.Contains(ws, "gzip stream ends early") {
			t.Errorf("cut at %d: warnings %q", cut, ws)
		}
		if cut == len(full)-4 && n != len(evs) {
			t.Errorf("cut in the trailer: %d events, want all %d", n, len(evs))
		}
		if cut == len(full)/2 && (n == 0 || n >= len(evs)) {
			t.Errorf("cut in the middle: %d events of %d", n, len(evs))
		}
	}
}

func TestMidFileGarbage(t *testing.T) {
	small, err := os.ReadFile(filepath.Join(fixtureDir, "small.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(small), "\n")
	bad := []string{
		"this is garbage\n",
		`{"t":1,"conn":1,"msg":{"v":2,"type":"sample","seq":1,"t":1}}` + "\n",
		`{"t":1,"conn":1,"wobble":{}}` + "\n",
		`{"conn":1,"note":{"kind":"info","text":"no time"}}` + "\n",
		"\n",
	}
	var mixed []string
	mixed = append(mixed, lines[:4]...)
	mixed = append(mixed, bad...)
	mixed = append(mixed, lines[4:]...)
	r, err := NewReader("mixed", strings.NewReader(strings.Join(mixed, "")))
	if err != nil {
		t.Fatal(err)
	}
	var got []session.Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	assertEvents(t, got, fixtureEvents(t))
	ws := r.Warnings()
	want := []string{"line 5: not JSON", "line 6: hook message: unsupported protocol version 2", "line 7: no msg, gpu or note", "line 8: field t: missing"}
	if len(ws) != len(want) {
		t.Fatalf("warnings %q, want %d", ws, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(ws[i], w) || strings.Contains(ws[i], "\n") {
			t.Errorf("warning %q, want one line starting %q", ws[i], w)
		}
	}
}

func TestNotARecording(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":    "",
		"protocol": `{"v":1,"type":"hello","seq":0}` + "\n",
		"text":     "hello world\n",
		"binary":   "\x00\x01\x02",
		"format 0": `{"vramscope_recording":0}` + "\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(content), 0o644)
		_, err := Open(path)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want a one-line error", name, err)
			continue
		}
		if name != "format 0" && !errors.Is(err, errNotRecording) {
			t.Errorf("%s: %v does not say it is not a recording", name, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl.gz")
	w, err := Create(path, Header{})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 500
	var wg sync.WaitGroup
	for g := 1; g <= writers; g++ {
		wg.Add(1)
		go func(conn uint64) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				note := &session.Note{Kind: session.NoteInfo, Text: fmt.Sprint(i)}
				if err := w.Write(session.Event{At: time.Now(), Conn: conn, Note: note}); err != nil {
					t.Error(err)
					return
				}
			}
		}(uint64(g))
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, warnings := readAll(t, path)
	if len(got) != writers*each || len(warnings) > 0 {
		t.Fatalf("%d events (want %d), warnings %q", len(got), writers*each, warnings)
	}
	next := map[uint64]int{}
	for _, e := range got {
		if e.Note.Text != fmt.Sprint(next[e.Conn]) {
			t.Fatalf("conn %d: note %q, want %d: order lost or lines interleaved", e.Conn, e.Note.Text, next[e.Conn])
		}
		next[e.Conn]++
	}
}

// onDisk reads what a reader can get from the file right now.
func onDisk(t *testing.T, path string) []session.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(path, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the file does not read while open: %v", err)
	}
	var evs []session.Event
	for {
		e, err := r.Next()
		if err != nil {
			return evs
		}
		evs = append(evs, e)
	}
}

func TestFlushOnTick(t *testing.T) {
	for _, name := range []string{"r.jsonl", "r.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			tick := make(chan time.Time)
			now := time.Unix(1000, 0)
			w, err := Create(path, Header{}, withTicker(tick, func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			note := session.Event{At: now, Note: &session.Note{Kind: session.NoteInfo, Text: "x"}}
			w.Write(note)
			w.Write(note)
			if n := len(onDisk(t, path)); n != 0 {
				t.Fatalf("%d events on disk before any tick: the flush is not driven by the interval", n)
			}
			tick <- now // handled once the flusher takes the next one
			tick <- now
			if n := len(onDisk(t, path)); n != 2 {
				t.Fatalf("%d events on disk after a tick, want 2", n)
			}
			// With the flusher starved, Write itself flushes once the interval passed.
			w.Write(note)
			now = now.Add(DefaultFlushInterval)
			w.Write(note)
			if n := len(onDisk(t, path)); n != 4 {
				t.Fatalf("%d events on disk after an interval, want 4", n)
			}
		})
	}
}

// TestKilledWriter leaves a writer open (as SIGKILL would) and reads the
// file after a real flush interval: everything written is there.
func TestKilledWriter(t *testing.T) {
	for _, name := range []string{"r.jsonl", "r.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), name)
			evs := fixtureEvents(t)
			w := writeAll(t, path, fixtureHeader(), evs)
			defer w.Close() // after the check: the test is what a kill leaves
			time.Sleep(DefaultFlushInterval + 250*time.Millisecond)
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got []session.Event
			for {
				e, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, e)
			}
			assertEvents(t, got, evs)
			if strings.HasSuffix(name, ".gz") && !strings.Contains(strings.Join(r.Warnings(), " "), "gzip stream ends early") {
				t.Errorf("warnings %q: want a note that the gzip stream was not closed", r.Warnings())
			}
		})
	}
}

func TestGzipByMagicNotName(t *testing.T) {
	dir := t.TempDir()
	gzPath := filepath.Join(dir, "plain-name.jsonl")
	w := writeAll(t, gzPath, Header{}, fixtureEvents(t), WithGzip(true))
	w.Close()
	head, _ := os.ReadFile(gzPath)
	if _, err := gzip.NewReader(bytes.NewReader(head)); err != nil {
		t.Fatalf("WithGzip(true) did not compress: %v", err)
	}
	if got, _ := readAll(t, gzPath); len(got) != len(fixtureEvents(t)) {
		t.Errorf("gzip under a plain name: %d events", len(got))
	}
	plainPath := filepath.Join(dir, "gz-name.jsonl.gz")
	w = writeAll(t, plainPath, Header{}, fixtureEvents(t), WithGzip(false))
	w.Close()
	if got, _ := readAll(t, plainPath); len(got) != len(fixtureEvents(t)) {
		t.Errorf("plain under a .gz name: %d events", len(got))
	}
}

func TestHeaderMetaKeepsUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	devs := json.RawMessage(`[{"index":0,"uuid":"GPU-1","total":1}]`)
	w, err := Create(path, Header{Meta: map[string]json.RawMessage{"devices": devs}, Argv: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Header().Meta["devices"]; !bytes.Equal(got, devs) {
		t.Errorf("meta devices %s, want %s", got, devs)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("empty recording: Next = %v, want io.EOF", err)
	}
}

// Begins is written as meta.begins beside the other meta keys, and read
// back from there; a meta.begins that is not a string stays in Meta.
func TestHeaderBeginsIsMetaBegins(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := Header{Format: 1, Version: "1.0", Created: at, Tool: "t", Begins: "step 7 of session s",
		Meta: map[string]json.RawMessage{"devices": json.RawMessage(`[]`)}}
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"vramscope_recording":1,"version":"1.0","created":"2026-01-02T03:04:05Z","tool":"t","host":"","argv":null,"source":"","meta":{"begins":"step 7 of session s","devices":[]}}`
	if string(got) != want {
		t.Errorf("header\n got %s\nwant %s", got, want)
	}
	if len(h.Meta) != 1 {
		t.Errorf("marshalling changed the caller's Meta: %v", h.Meta)
	}
	back, err := parseHeader(got)
	if err != nil {
		t.Fatal(err)
	}
	if back.Begins != h.Begins || len(back.Meta) != 1 || string(back.Meta["devices"]) != `[]` {
		t.Errorf("read back Begins %q, Meta %v", back.Begins, back.Meta)
	}
	plain, err := parseHeader([]byte(`{"vramscope_recording":1,"meta":{"begins":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Begins != "" || string(plain.Meta["begins"]) != "7" {
		t.Errorf("non-string begins: Begins %q, Meta %v", plain.Begins, plain.Meta)
	}
}
