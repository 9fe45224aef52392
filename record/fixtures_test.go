package record

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

var update = flag.Bool("update", false, "rewrite testdata/recordings from fixtureEvents")

var fixtureDir = filepath.Join("..", "testdata", "recordings")

const fixtureGPU = "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f"

func fixtureHeader() Header {
	return Header{
		Created: time.Date(2025, 11, 22, 7, 0, 0, 0, time.UTC),
		Tool:    "vramscope 0.1.0",
		Host:    "trainbox",
		Argv:    []string{"vramscope", "record", "-o", "small.jsonl"},
		Source:  SourceLive,
		Meta:    map[string]json.RawMessage{"fixture": json.RawMessage(`"small"`)},
	}
}

// fixtureEvents is what small.jsonl holds: a rank that connects, says
// hello, runs 2 steps of zero_grad/forward/backward/step with samples, a
// mark, anatomy and stats, GPU samples with and without the process list,
// notes, and a goodbye.
func fixtureEvents(t testing.TB) []session.Event {
	t.Helper()
	base := time.Date(2025, 11, 22, 7, 0, 0, 250000000, time.UTC)
	var evs []session.Event
	at := func(ms float64) time.Time { return base.Add(time.Duration(ms * float64(time.Millisecond))) }
	msg := func(ms float64, line string) {
		m, err := ipc.Decode([]byte(line))
		if err != nil {
			t.Fatalf("fixture message %s: %v", line, err)
		}
		evs = append(evs, session.Event{At: at(ms), Conn: 1, Msg: m})
	}
	mem := func(a int64) string {
		return fmt.Sprintf(`{"allocated":%d,"max_allocated":%d,"reserved":%d,"max_reserved":%d,"alloc_retries":0,"ooms":0}`, a, a+1<<20, 2<<30, 2<<30)
	}
	evs = append(evs, session.Event{At: at(0.1), Conn: 1, Note: &session.Note{Kind: session.NoteConnect, Text: "pid 4242 connected"}})
	msg(0.3, `{"v":1,"type":"hello","seq":0,"t":1000.5,"session":"a1b2c3d4e5f60718","pid":4242,"nspid":[4242],"host":"trainbox","argv":["train.py","--lr","3e-4"],"rank":0,"local_rank":0,"world_size":1,"torch":"2.3.1+cu121","cuda":{"index":0,"uuid":"`+fixtureGPU+`","name":"NVIDIA A100-SXM4-80GB","total":85899345920},"clock":{"mono":1000.5,"wall":1763794800.25},"hook":{"version":"0.1.0","sample_hz":50.0,"reset_peaks":false,"activations_every":100}}`)
	seq, ms := 1, 10.0
	for step := 0; step < 2; step++ {
		for _, ph := range []string{"zero_grad", "forward", "backward", "step"} {
			for _, edge := range []string{"begin", "end"} {
				alloc := int64(294649856 + step*1000 + seq*4096)
				msg(ms, fmt.Sprintf(`{"v":1,"type":"phase","seq":%d,"t":%.3f,"name":%q,"step":%d,"micro":0,"edge":%q,"user":false,"mem":%s}`, seq, 1000.5+ms/1000, ph, step, edge, mem(alloc)))
				seq++
				ms += 7.5
				if ph != "zero_grad" && edge == "begin" {
					msg(ms, fmt.Sprintf(`{"v":1,"type":"sample","seq":%d,"t":%.3f,"mem":%s}`, seq, 1000.5+ms/1000, mem(alloc+1<<20)))
					seq++
					ms += 12.25
				}
			}
		}
		evs = append(evs, session.Event{At: at(ms), GPU: &probe.Sample{
			At: at(ms), Device: fixtureGPU, Used: 3 << 30, Reserved: 512 << 20, Free: 76 << 30, Total: 85899345920,
			Util: 97, Took: 180 * time.Microsecond,
		}})
		ms += 3
	}
	msg(ms, fmt.Sprintf(`{"v":1,"type":"mark","seq":%d,"t":%.3f,"name":"checkpoint","step":1,"mem":null}`, seq, 1000.5+ms/1000))
	seq++
	msg(ms+1, fmt.Sprintf(`{"v":1,"type":"anatomy","seq":%d,"t":%.3f,"step":1,"weights":305857756,"gradients":305857756,"optimizer":611715512,"activations":1468006400,"batch_size":32,"params":76464439,"device":"cuda"}`, seq, 1000.5+(ms+1)/1000))
	seq++
	evs = append(evs, session.Event{At: at(ms + 2), GPU: &probe.Sample{
		At: at(ms + 1.5), Device: fixtureGPU, Used: 3 << 30, Reserved: -1, Free: 76 << 30, Total: 85899345920,
		Util: -1, Processes: []probe.Process{{PID: 4242, Used: 2 << 30}, {PID: 999, Used: 1 << 30}}, Took: 2 * time.Millisecond,
	}})
	evs = append(evs, session.Event{At: at(ms + 2.5), GPU: &probe.Sample{
		At: at(ms + 2.5), Device: "GPU-00000000-1111-2222-3333-444444444444", Used: 0, Reserved: -1, Free: 80 << 30, Total: 85899345920,
		Util: 0, Processes: []probe.Process{},
	}})
	msg(ms+3, fmt.Sprintf(`{"v":1,"type":"stats","seq":%d,"t":%.3f,"stats":{"created":%d,"dropped":0,"evicted":0,"send_errors":0,"connects":1}}`, seq, 1000.5+(ms+3)/1000, seq+1))
	seq++
	evs = append(evs, session.Event{At: at(ms + 4), Conn: 1, Note: &session.Note{Kind: session.NoteError, Text: `conn 1: unknown message type "telemetry"`}})
	evs = append(evs, session.Event{At: at(ms + 4.5), Note: &session.Note{Kind: session.NoteInfo, Text: "NVML: simulated"}})
	msg(ms+5, fmt.Sprintf(`{"v":1,"type":"goodbye","seq":%d,"t":%.3f,"reason":"exit","stats":{"created":%d,"dropped":0,"evicted":0,"send_errors":0,"connects":1}}`, seq, 1000.5+(ms+5)/1000, seq+1))
	evs = append(evs, session.Event{At: at(ms + 6), Conn: 1, Note: &session.Note{Kind: session.NoteDisconnect, Text: "pid 4242 disconnected"}})
	return evs
}

// tornTail is appended to small.jsonl to make torn.jsonl: half an event.
const tornTail = `{"t":1763794800.900000,"conn":1,"msg":{"v":1,"type":"sample","seq":99,"t":1001.1,"mem":{"allocated":12`

// renderFixture writes the fixture recording and returns its bytes.
func renderFixture(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "small.jsonl")
	w, err := Create(path, fixtureHeader())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fixtureEvents(t) {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFixturesUpToDate(t *testing.T) {
	small := renderFixture(t)
	future := bytes.Replace(small[:bytes.IndexByte(small, '\n')+1], []byte(`"vramscope_recording":1,"version":"1.0"`), []byte(`"vramscope_recording":2,"version":"2.0"`), 1)
	future = append(future, `{"t":1763794800.250100,"conn":1,"frame":{"kind":"from the future"}}`+"\n"...)
	files := map[string][]byte{
		"small.jsonl":  small,
		"torn.jsonl":   append(append([]byte(nil), small...), tornTail...),
		"future.jsonl": future,
	}
	for name, want := range files {
		path := filepath.Join(fixtureDir, name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./record -run TestFixturesUpToDate -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what this build writes; if the change is intended, run go test ./record -run TestFixturesUpToDate -update", name)
		}
	}
}

func TestReadFixtureSmall(t *testing.T) {
	got, warnings := readAll(t, filepath.Join(fixtureDir, "small.jsonl"))
	if len(warnings) != 0 {
		t.Errorf("warnings on a clean recording: %q", warnings)
	}
	assertEvents(t, got, fixtureEvents(t))
}

func TestReadFixtureTorn(t *testing.T) {
	got, warnings := readAll(t, filepath.Join(fixtureDir, "torn.jsonl"))
	assertEvents(t, got, fixtureEvents(t))
	if len(warnings) != 1 || !strings.Contains(warnings[0], "torn last line") {
		t.Errorf("warnings %q, want one about the torn last line", warnings)
	}
}

func TestReadFixtureFuture(t *testing.T) {
	_, err := Open(filepath.Join(fixtureDir, "future.jsonl"))
	want := "recording format 2 is newer than this vramscope (reads 1); upgrade vramscope"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("got %v, want an error ending in %q", err, want)
	}
}

// readAll reads every event of a recording.
func readAll(t *testing.T, path string) ([]session.Event, []string) {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []session.Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return evs, r.Warnings()
		}
		if err != nil {
			t.Fatalf("Next after %d events: %v", len(evs), err)
		}
		evs = append(evs, e)
	}
}
