package feed

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// `r` pressed 2:22 into a session made a recording whose
// replay started at the hook's hello, 2:22 before its first data, and
// whose report gave 153 s for 12 s of data. The recording, read back as
// replay and report read it, starts where its data starts.
func TestRecordingStartedMidSessionStartsWithItsData(t *testing.T) {
	base := time.Unix(1_790_000_000, 0)
	now := base
	path := filepath.Join(t.TempDir(), "mid.jsonl")
	f := New(WithClock(func() time.Time { return now }), WithOpener(func(p, _ string) (Writer, error) {
		return record.Create(p, record.Header{Source: record.SourceDemo})
	}))
	helloLine := `{"v":1,"type":"hello","seq":0,"t":1000,"session":"s","pid":7,"clock":{"mono":1000,"wall":1790000000},"from_a_newer_hook":true}`
	hello, err := ipc.Decode([]byte(helloLine))
	if err != nil {
		t.Fatal(err)
	}
	f.Put(session.Event{At: now, Conn: 1, Msg: hello})
	seq := uint64(0)
	sample := func() {
		seq++
		mono := 1000 + now.Sub(base).Seconds()
		line := `{"v":1,"type":"sample","seq":` + jsonNum(float64(seq)) + `,"t":` + jsonNum(mono) + `,"mem":{"allocated":1,"max_allocated":1,"reserved":2,"max_reserved":2}}`
		m, err := ipc.Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		f.Put(session.Event{At: now, Conn: 1, Msg: m})
	}
	for ; now.Sub(base) < 142*time.Second; now = now.Add(time.Second) {
		sample()
	}
	recStart := now
	if err := f.Start(path); err != nil {
		t.Fatal(err)
	}
	for ; now.Sub(recStart) <= 12*time.Second; now = now.Add(time.Second) {
		sample()
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}

	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []session.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if !strings.Contains(string(evs[0].Msg.Raw), `"from_a_newer_hook":true`) {
		t.Errorf("the restated hello lost a field this build does not know: %s", evs[0].Msg.Raw)
	}
	var pacer session.Pacer // as replay plays it
	for i := range evs {
		pacer.Pace(&evs[i])
	}
	if d := evs[0].At.Sub(recStart); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("the replay starts %v from where recording began, want 0", d)
	}
	st := session.New()
	st.ApplyAll(evs)
	p := st.Processes()[0]
	if d := p.Last.Sub(p.First); d < 11*time.Second || d > 13*time.Second {
		t.Errorf("the process spans %v in the recording, want the 12 s recorded", d)
	}
	if d := st.Last().Sub(st.Start()); d > 13*time.Second {
		t.Errorf("the recording spans %v, want the 12 s recorded", d)
	}
}

func jsonNum(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// "record to X: create recording X: open X: no such file or
// directory" named the path three times. Once now, the cause still
// matchable.
func TestRecordingErrorNamesThePathOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "run.jsonl")
	f := New(WithOpener(func(p, _ string) (Writer, error) { return record.Create(p, record.Header{}) }))
	err := f.Start(path)
	if err == nil {
		t.Fatal("recording into a missing directory succeeded")
	}
	if n := strings.Count(err.Error(), path); n != 1 {
		t.Errorf("%q names the path %d times, want once", err, n)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v is not fs.ErrNotExist", err)
	}
}
