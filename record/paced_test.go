package record

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/session"
)

// fullPacedEndOf is the reference: every event through Next and a Pacer.
func fullPacedEndOf(t testing.TB, path string) time.Time {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var (
		p   session.Pacer
		end time.Time
	)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return end
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Pace(&ev)
		end = ev.At
	}
}

func checkPacedEnd(t *testing.T, path string) {
	t.Helper()
	want := fullPacedEndOf(t, path)
	got, err := PacedEnd(context.Background(), path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !got.Equal(want) {
		t.Errorf("%s: PacedEnd %s, full read %s", filepath.Base(path), got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

func gzipCopy(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	out := path + ".gz"
	if err := os.WriteFile(out, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// multiRankRecording interleaves three demo ranks, each on its own
// connection with its own clock, received out of their timeline order.
func multiRankRecording(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ranks.jsonl")
	w, err := Create(path, Header{Source: SourceDemo})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := demo.Lookup("")
	if err != nil {
		t.Fatal(err)
	}
	var ranks [3][]session.Event
	for r := range ranks {
		at := demo.DefaultWall.Add(time.Duration(r) * time.Second)
		for _, m := range demo.Generate(sc, demo.Config{Steps: 20}) {
			if m.Clock != nil {
				c := *m.Clock
				c.Mono += float64(r) * 1000 // another process, another clock
				m.Clock = &c
			}
			m.T += float64(r) * 1000
			at = at.Add(time.Duration(2+r) * time.Millisecond)
			ranks[r] = append(ranks[r], session.Event{At: at, Conn: uint64(r + 1), Msg: &m})
		}
	}
	for i := 0; ; i++ {
		wrote := false
		for r := range ranks {
			if i < len(ranks[r]) {
				if err := w.Write(ranks[r][i]); err != nil {
					t.Fatal(err)
				}
				wrote = true
			}
		}
		if !wrote {
			break
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPacedEndMatchesFullRead compares PacedEnd with the full read on the
// fixtures, demo recordings (plain, gzip, several ranks, torn) and the
// files in $VRAMSCOPE_PACED_FILES (colon-separated) when set.
func TestPacedEndMatchesFullRead(t *testing.T) {
	paths := []string{
		filepath.Join(fixtureDir, "small.jsonl"),
		filepath.Join(fixtureDir, "torn.jsonl"),
	}
	dem := demoRecording(t)
	ranks := multiRankRecording(t)
	paths = append(paths, dem, gzipCopy(t, dem), ranks, gzipCopy(t, ranks))
	data, err := os.ReadFile(dem)
	if err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(t.TempDir(), "torn.jsonl")
	if err := os.WriteFile(torn, data[:len(data)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, torn, gzipCopy(t, torn))
	if env := os.Getenv("VRAMSCOPE_PACED_FILES"); env != "" {
		paths = append(paths, strings.Split(env, ":")...)
	}
	for _, p := range paths {
		checkPacedEnd(t, p)
	}
}

// TestPacedEndSkipsWhatNextSkips puts lines the light read takes but Next
// does not (or reads differently) at the end of a recording, where a
// wrong reading would set the end, and also at its start.
func TestPacedEndSkipsWhatNextSkips(t *testing.T) {
	small, err := os.ReadFile(filepath.Join(fixtureDir, "small.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(small), "\n")
	bad := []string{
		`{"t":1963794800,"conn":1,"msg":{"v":2,"type":"sample","seq":1,"t":1}}`,
		`{"t":1963794800,"conn":1,"msg":{"v":1,"type":"sample","seq":99,"t":1e12}}`,
		`{"t":1963794800,"conn":1,"note":{"kind":"info","text":"x"},"gpu":{}}`,
		`{"t":1963794800,"conn":1,"note":null}`,
		`{"t":1963794800,"conn":1,"wobble":{}}`,
		`{"t":1963794800,"T":1863794800,"note":{"kind":"info","text":"x"}}`,
		`{"t":1763794800,"gpu":{"at":1963794800,"AT":1763794801,"device":"x"}}`,
		`{"t":1763794800,"gpu":{"at":1963794800,"at":1763794801,"device":"x"}}`,
		`{"t":1763794800,"gpu":{"at":"1963794800","device":"x"}}`,
		`{"t":1763794800,"conn":1,"msg":{"v":1,"type":"sample","seq":99,"t":2000,"T":1000}}`,
		`{"t":1763794800,"conn":1,"msg":{"v":1,"type":"sample","seq":99,"t":2000,"clock":{"mono":0,"wall":1}}}`,
		`{"t":1763794800,"conn":1,"msg":{"v":1,"type":"hello","seq":0,"t":2000,"clock":{"mono":0,"wall":1963794800}}}`,
		`{"t":1963794800,"conn":1.5,"note":{"kind":"info","text":"x"}}`,
		`{"t":1963794800,"note":{"kind":"info","text":"x"}} x`,
		`{"t":1963794800,"note":{"kind":"info","text":"x"}`,
		`{"t":1963794800,"n\u006fte":{"kind":"info","text":"x"}}`,
	}
	dir := t.TempDir()
	for i, b := range bad {
		for _, at := range []int{2, len(lines) - 1} {
			mixed := append(append(append([]string(nil), lines[:at]...), b+"\n"), lines[at:]...)
			path := filepath.Join(dir, "mixed.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(mixed, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Logf("line %d at %d", i, at)
			checkPacedEnd(t, path)
		}
	}
}

func TestPacedEndCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := PacedEnd(ctx, multiRankRecording(t)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v, want context.Canceled", err)
	}
}

func TestLightTimeMatchesParseTime(t *testing.T) {
	for _, lit := range []string{
		"0", "1", "1763794800", "1763794800.250100", "1763794800.123456789",
		"1763794800.1234567891", "1.5e9", "-1.25", "999999999999999999.5",
		"9999999999999999999.5", "0.000000001", "12.",
	} {
		want, werr := parseTime([]byte(lit))
		got, gerr := lightTime([]byte(lit))
		if (werr == nil) != (gerr == nil) || !got.Equal(want) {
			t.Errorf("lightTime(%q) = %v, %v; parseTime %v, %v", lit, got, gerr, want, werr)
		}
	}
}
