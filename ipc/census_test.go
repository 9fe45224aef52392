package ipc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/fixture"
)

type censusFixture struct {
	Census  []string `json:"census"`
	Invalid []struct {
		Case, Line, Error string
	} `json:"invalid"`
	Requests []struct {
		Line    string         `json:"line"`
		Request map[string]any `json:"request"`
	} `json:"requests"`
	Ignored []string `json:"ignored_requests"`
	Bad     []string `json:"invalid_requests"`
}

func readCensusFixture(t testing.TB) censusFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "protocol", "census.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx censusFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

// The hook's census lines decode, with the holder that keeps the losses.
func TestCensusFixtureDecodes(t *testing.T) {
	fx := readCensusFixture(t)
	if len(fx.Census) < 2 {
		t.Fatal("fixture has fewer than two census lines")
	}
	for i, l := range fx.Census {
		m, err := Decode([]byte(l))
		if err != nil {
			t.Fatalf("census line %d: %v", i+1, err)
		}
		c := m.Census
		var losses *CensusHolder
		for k := range c.Holders {
			if c.Holders[k].Name == "losses[...]" {
				losses = &c.Holders[k]
			}
		}
		if losses == nil || losses.Kind != HolderLocal || losses.Function != "train" || losses.Line == nil ||
			losses.Graphs == 0 || losses.GraphFreed != losses.Graphs || losses.GraphSaved != 0 {
			t.Fatalf("line %d: losses holder %+v", i+1, losses)
		}
		if c.Request == nil || *c.Request != 7 {
			t.Fatalf("line %d: request %v, want 7", i+1, c.Request)
		}
	}
}

func TestCensusInvalidCasesAreRefused(t *testing.T) {
	for _, c := range readCensusFixture(t).Invalid {
		_, err := Decode([]byte(c.Line))
		if err == nil || err.Error() != c.Error {
			t.Errorf("%s: got %v, want %q", c.Case, err, c.Error)
		}
	}
}

// The requests the hook takes, ignores and skips are the ones DecodeRequest
// takes, ignores and refuses; a request the monitor makes is one the hook takes.
func TestRequestsMatchTheHooksReading(t *testing.T) {
	fx := readCensusFixture(t)
	for _, r := range fx.Requests {
		got, err := DecodeRequest([]byte(r.Line))
		if err != nil {
			t.Fatalf("%s: %v", r.Line, err)
		}
		want := Request{V: 1, Type: r.Request["type"].(string), ID: int64(r.Request["id"].(float64)), Reason: r.Request["reason"].(string)}
		if d, ok := r.Request["capture_dir"].(string); ok {
			want.CaptureDir = d
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v, want %+v", r.Line, got, want)
		}
		line, err := got.Line()
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeRequest(line)
		if err != nil || again != got {
			t.Fatalf("round trip of %s: %+v, %v", line, again, err)
		}
	}
	for _, l := range fx.Ignored {
		r, err := DecodeRequest([]byte(l))
		if err != nil || r.Type == RequestCensus {
			t.Fatalf("%s: want an ignored type, got %+v, %v", l, r, err)
		}
	}
	for _, l := range fx.Bad {
		if r, err := DecodeRequest([]byte(l)); err == nil {
			t.Fatalf("%.80s: accepted as %+v", l, r)
		} else if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error of more than one line: %q", err)
		}
	}
	if _, err := (Request{V: 1, Type: RequestCensus, ID: 1, Reason: CensusOOM}).Line(); err == nil {
		t.Fatal("a request with reason oom was made")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	fx := readCensusFixture(f)
	for _, r := range fx.Requests {
		f.Add([]byte(r.Line))
	}
	for _, l := range append(fx.Ignored, fx.Bad...) {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeRequest(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if r.Type == RequestCensus {
			if _, err := r.Line(); err != nil {
				t.Fatalf("accepted %q but cannot make it: %v", line, err)
			}
		}
	})
}

// The hook's census at an out-of-memory error inside a forward splits the
// saved tensors of the step's graph by module, adding up to what the
// graph's holder keeps.
func TestOOMCensusFixtureSplitsSavedByModule(t *testing.T) {
	m, err := Decode([]byte(fixture.OOMCensusLine(t)))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Census
	sm := c.SavedByModule
	if c.Reason != CensusOOM || sm == nil || len(sm.Modules) == 0 || sm.Modules[0].Module == nil {
		t.Fatalf("census %+v", c)
	}
	if got, want := sm.Total(), c.Holders[0].GraphSaved; got != want || c.Holders[0].Name != "h" {
		t.Fatalf("split adds up to %d, holder %s keeps %d saved", got, c.Holders[0].Name, want)
	}
}
