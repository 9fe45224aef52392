package record

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/session"
)

// checkFastLine fails when the fast path takes a line and decodes it other
// than encoding/json does, or rejects a line its shape is meant to take.
func checkFastLine(t testing.TB, line []byte) (fast bool) {
	t.Helper()
	got, ok := fastParseEvent(line)
	want, err := parseEventJSON(line)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("fast path took a line encoding/json rejects (%v):\n%s", err, line)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fast and slow paths differ on\n%s\nfast %+v\nslow %+v", line, got, want)
	}
	return true
}

// fileLines returns the event lines (not the header) of a recording.
func fileLines(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(zr) // an unfinished stream reads up to its last flush
		data = b.Bytes()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLine)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	return lines[min(1, len(lines)):]
}

// demoRecording writes a recording of a demo run (its hook messages) with
// a default-rate mix of NVML samples, and returns its path.
func demoRecording(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demo.jsonl")
	w, err := Create(path, Header{Source: SourceDemo})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := demo.Lookup("")
	if err != nil {
		t.Fatal(err)
	}
	at := demo.DefaultWall
	for i, m := range demo.Generate(sc, demo.Config{Steps: 40}) {
		at = at.Add(3 * time.Millisecond)
		if err := w.Write(session.Event{At: at, Conn: 1, Msg: &m}); err != nil {
			t.Fatal(err)
		}
		if i%30 == 0 {
			for _, e := range benchMix(t, i/30, rand.New(rand.NewSource(int64(i))))[100:] {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFastLineMatchesJSON runs both paths over every line of the fixtures,
// of a demo recording and of $VRAMSCOPE_COMPARE_FILE when set, and checks
// that the fast path takes the lines it is for: hook messages, NVML samples.
func TestFastLineMatchesJSON(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, "*.jsonl"))
	paths = append(paths, demoRecording(t))
	if p := os.Getenv("VRAMSCOPE_COMPARE_FILE"); p != "" {
		paths = append(paths, p)
	}
	for _, path := range paths {
		var fast, slow int
		for _, line := range fileLines(t, path) {
			if checkFastLine(t, line) {
				fast++
				continue
			}
			slow++
			if e, err := parseEventJSON(line); err == nil && (e.GPU != nil || e.Msg != nil && (e.Msg.Type == "phase" || e.Msg.Type == "sample")) {
				t.Errorf("%s: a common line took the slow path:\n%s", filepath.Base(path), line)
			}
		}
		t.Logf("%s: %d lines fast, %d slow", filepath.Base(path), fast, slow)
	}
}

// FuzzParseEvent checks that whatever line the fast path takes, it
// decodes as encoding/json does.
func FuzzParseEvent(f *testing.F) {
	for _, path := range []string{filepath.Join(fixtureDir, "small.jsonl"), filepath.Join(fixtureDir, "torn.jsonl")} {
		for _, line := range fileLines(f, path) {
			f.Add(line)
		}
	}
	for _, s := range []string{
		`{"t":1,"conn":1,"msg":{"v":1,"type":"sample","seq":1,"t":2,"mem":{"allocated":1}},"conn":2}`,
		`{"t":1,"msg":null,"gpu":{}}`,
		`{"t":1,"gpu":{"processes":[],"at":2.5}}`,
		`{"T":1,"Note":{"kind":"info","text":"x"}}`,
		`{"t":"1","note":{}}`,
		`{"t":1,"msg":{"v":1,"type":"mark","seq":1,"t":2,"name":"}{\"","step":0,"mem":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkFastLine(t, line)
	})
}
