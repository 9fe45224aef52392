package diagnose

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// FuzzStore feeds the store whatever the decoder accepts, in any order, on
// several connections, with NVML samples between: the store, the
// diagnosis and the layers must never panic, whatever a hook sends.
func FuzzStore(f *testing.F) {
	if b, err := os.ReadFile("../testdata/protocol/valid.jsonl"); err == nil {
		if more, err := os.ReadFile("../testdata/protocol/additions.jsonl"); err == nil {
			b = append(b, more...) // forward inputs, fresh anatomies, oom, goodbye "error"
		}
		f.Add(b)
		// Messages out of order, repeated, before their hello.
		lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		var rev [][]byte
		for i := len(lines) - 1; i >= 0; i-- {
			rev = append(rev, lines[i])
		}
		f.Add(bytes.Join(rev, []byte("\n")))
		f.Add(bytes.Join(append(lines, lines...), []byte("\n")))
	}
	f.Add([]byte(`{"v":1,"type":"phase","seq":3,"t":1e300,"name":"x","step":9007199254740991,"edge":"end","mem":{"allocated":9007199254740991,"max_allocated":0,"reserved":0,"max_reserved":0}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := session.New(session.WithMaxSteps(10), session.WithMaxSpans(16), session.WithMaxStepPeaks(10))
		at := time.Unix(1_700_000_000, 0)
		for i, line := range bytes.Split(data, []byte("\n")) {
			m, err := ipc.Decode(line)
			if err != nil {
				continue
			}
			at = at.Add(time.Millisecond)
			s.Apply(session.Event{At: at, Conn: uint64(1 + i%3), Msg: m})
			if i%4 == 0 {
				used := int64(len(line)) << 20
				s.Apply(session.Event{At: at, GPU: &probe.Sample{At: at, Device: "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f",
					Used: used, Total: 80 << 30, Processes: []probe.Process{{PID: 4242, Used: used / 2}}}})
			}
			if i%7 == 0 {
				s.Apply(session.Event{At: at, Conn: uint64(1 + i%3), Note: &session.Note{Kind: session.NoteDisconnect}})
			}
		}
		for _, p := range s.Processes() {
			d := Diagnose(s, p)
			_ = d.Headline()
			_ = d.Lines()
			_ = LayersOf(s, p)
			p.Allocated.Columns(nil, s.Start(), s.Last().Add(time.Second), 80)
		}
	})
}
