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

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// `r` pressed 2:22 into a session made a recording whose replay started
// at the hook's hello, 2:22 before its first data, then one
// that held only the 12 s after the key. It now opens with the history
// the monitor holds: the hello as the hook sent it and the 142 s before
// the key, so its data runs from the hello without a stretch of nothing,
// and nothing is counted lost.
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
		t.Errorf("the hello lost a field this build does not know: %s", evs[0].Msg.Raw)
	}
	var pacer session.Pacer // as replay plays it
	for i := range evs {
		pacer.Pace(&evs[i])
	}
	if d := evs[0].At.Sub(base); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("the replay starts %v from the hello, want 0", d)
	}
	for i := 1; i < len(evs); i++ {
		if d := evs[i].At.Sub(evs[i-1].At); d > 1100*time.Millisecond {
			t.Errorf("%v without data at %v", d, evs[i-1].At.Sub(base))
		}
	}
	st := session.New()
	st.ApplyAll(evs)
	p := st.Processes()[0]
	if d := p.Last.Sub(p.First); d < 153*time.Second || d > 155*time.Second || p.Lost != 0 {
		t.Errorf("the process spans %v in the recording with %d lost, want the 154 s the monitor saw, none lost", d, p.Lost)
	}
}

// A long run's recording started late holds what the monitor kept: the
// first steps (the warmup, their anatomies) and the newest steps, with a
// resume note where the messages between were let go, so they are not
// counted lost.
func TestLateRecordingHoldsTheFirstAndNewestSteps(t *testing.T) {
	sc, err := demo.Lookup("warmup")
	if err != nil {
		t.Fatal(err)
	}
	msgs := demo.Generate(sc, demo.Config{Steps: 300})
	msgs = msgs[:len(msgs)-1] // still running
	w := &memWriter{}
	f := New(WithOpener(func(string, string) (Writer, error) { return w, nil }))
	c := msgs[0].Clock
	at := func(m *ipc.Message) time.Time {
		return time.Unix(0, int64((c.Wall+(m.T-c.Mono))*1e9))
	}
	for i := range msgs {
		f.Put(session.Event{At: at(&msgs[i]), Conn: 1, Msg: &msgs[i]})
	}
	if err := f.Start("late.jsonl"); err != nil {
		t.Fatal(err)
	}
	st := session.New()
	st.ApplyAll(w.evs)
	p := st.Processes()[0]
	pk := p.StepPeaks()
	if len(pk) == 0 || pk[0].Index != 0 || pk[2].Index != 2 || pk[len(pk)-1].Index != 299 || len(pk) >= 300 {
		t.Fatalf("steps %d: first %d, last %d; want 0-2 and the newest, not all 300", len(pk), pk[0].Index, pk[len(pk)-1].Index)
	}
	if p.Anatomy == nil || len(p.Anatomies) < 3 {
		t.Errorf("the recording has %d anatomies, want the first steps'", len(p.Anatomies))
	}
	if p.Lost != 0 {
		t.Errorf("%d messages counted lost; the ones let go are only not in the file", p.Lost)
	}
	resumes := 0
	for _, ev := range w.evs {
		if ev.Note != nil && ev.Note.Kind == session.NoteResume {
			resumes++
		}
	}
	if resumes != 1 {
		t.Errorf("%d resume notes, want 1 at the gap", resumes)
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
