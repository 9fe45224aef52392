package report

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// fixtureStores loads every fixture recording that opens.
func fixtureStores(t *testing.T) map[string]*session.Store {
	t.Helper()
	var paths []string
	for _, dir := range []string{"h100", "h200", "recordings"} {
		found, err := filepath.Glob(filepath.Join("../testdata", dir, "*.jsonl*"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, found...)
	}
	stores := map[string]*session.Store{}
	for _, p := range paths {
		if r, err := record.Open(p); err != nil {
			continue // a fixture of a bad header
		} else {
			r.Close()
		}
		stores[p] = loadRecording(t, p)
	}
	if len(stores) < 10 {
		t.Fatalf("%d stores, want the fixtures", len(stores))
	}
	return stores
}

// WriteJSON writes one process at a time, its steps without
// encoding/json; its bytes are those of the whole report encoded at once,
// for every fixture, with several processes and with none.
func TestWriteJSONIsTheWholeEncoding(t *testing.T) {
	several := false
	for path, s := range fixtureStores(t) {
		rep := Build(s)
		several = several || len(rep.Processes) > 1
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
	if !several {
		t.Error("no fixture has several processes")
	}
}

// randomFill sets every field of v (a struct, through its pointer) to a
// random value, so a field added to Step or Phase is covered here too.
func randomFill(rng *rand.Rand, v reflect.Value) {
	words := []string{"", "forward", "backward", "optimizer", "q\"uote", "back\\slash", "tab\there",
		"<html>&", "é", "\u2028", "bad\xffutf8", "\x00", "name with spaces"}
	floats := []float64{0, -0.0, 1, -1, 0.5, 1e-7, -3e-9, 1e-6, 1e20, 1e21, 1.5e300, 123456.789012,
		math.SmallestNonzeroFloat64, math.MaxFloat64, rng.Float64() * 1000, rng.NormFloat64()}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				randomFill(rng, v.Field(i))
			}
		}
	case reflect.String:
		v.SetString(words[rng.IntN(len(words))])
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 1)
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{-1, 0, 1, rng.Int64N(1 << 40), -rng.Int64N(1 << 40), math.MaxInt64, math.MinInt64}[rng.IntN(7)])
	case reflect.Uint8:
		v.SetUint(uint64(rng.IntN(4)))
	case reflect.Float64:
		v.SetFloat(floats[rng.IntN(len(floats))])
	case reflect.Slice:
		switch rng.IntN(4) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			s := reflect.MakeSlice(v.Type(), 1+rng.IntN(3), 3)
			for i := range s.Len() {
				randomFill(rng, s.Index(i))
			}
			v.Set(s)
		}
	default:
		panic("randomFill: no case for " + v.Kind().String())
	}
}

// appendSteps writes what encoding/json writes for steps whose every field
// is set (odd strings, floats of every form, unknown bytes, nil and empty
// phases), at the processes' depth and at others.
func TestAppendStepsIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var steps []Step
		randomFill(rng, reflect.ValueOf(&struct{ S *[]Step }{&steps}).Elem().Field(0).Elem())
		prefix := strings.Repeat(" ", 2*rng.IntN(4))
		var want bytes.Buffer
		if err := encodeIndented(&want, steps, prefix); err != nil {
			t.Fatal(err)
		}
		got := appendSteps([]byte("x"), steps, prefix, nil)
		if w := "x" + strings.TrimSuffix(want.String(), "\n"); string(got) != w {
			t.Fatalf("case %d (prefix %q):\n got %s\nwant %s", i, prefix, got, w)
		}
	}
}

// appendSteps hands on what it holds between steps once it holds flushAt
// bytes; the pieces are the whole.
func TestAppendStepsFlushes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	steps := make([]Step, 4000)
	for i := range steps {
		randomFill(rng, reflect.ValueOf(&steps[i]).Elem())
	}
	var want bytes.Buffer
	if err := encodeIndented(&want, steps, "    "); err != nil {
		t.Fatal(err)
	}
	var got []byte
	flushes := 0
	last := appendSteps(nil, steps, "    ", func(b []byte) []byte {
		if len(b) < flushAt {
			t.Errorf("flushed %d bytes, want at least %d", len(b), flushAt)
		}
		flushes++
		got = append(got, b...)
		return b[:0]
	})
	got = append(got, last...)
	if flushes < 2 {
		t.Errorf("%d flushes of %d bytes", flushes, len(got))
	}
	if string(got) != strings.TrimSuffix(want.String(), "\n") {
		t.Error("the flushed pieces differ from encoding/json")
	}
}

// A time that is not a number fails the report as encoding/json does;
// a failed write is the error WriteJSON returns.
func TestWriteJSONErrors(t *testing.T) {
	rep := Build(loadRecording(t, "../testdata/h100/clients.jsonl.gz"))
	var n int
	for i := range rep.Processes {
		n += len(rep.Processes[i].Steps)
	}
	if n == 0 {
		t.Fatal("no steps")
	}
	bad := *rep
	bad.Processes = append([]Process(nil), rep.Processes...)
	for i := range bad.Processes {
		if p := &bad.Processes[i]; len(p.Steps) > 0 {
			p.Steps = append([]Step(nil), p.Steps...)
			p.Steps[0].EndS = math.NaN()
			break
		}
	}
	var out bytes.Buffer
	if err := bad.WriteJSON(&out); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("a NaN time: %v, want encoding/json's error", err)
	}
	boom := errors.New("disk full")
	if err := rep.WriteJSON(failingWriter{boom}); !errors.Is(err, boom) {
		t.Errorf("a failed write: %v, want %v", err, boom)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }
