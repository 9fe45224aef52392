package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/fixture"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/session"
)

// The largest holder of the newest census is a gauge labelled by its
// name, clipped to MaxHolderLabel bytes whatever the process called it.
func TestLargestHolderIsExported(t *testing.T) {
	q, e := newExporter()
	at := time.Unix(1_763_794_800, 0)
	q.Put(session.Event{At: at, Conn: 1, Msg: &ipc.Message{V: 1, Type: ipc.TypeHello, Session: "c1", PID: 9,
		Clock: &ipc.Clock{Mono: 1, Wall: float64(at.Unix())}}})
	m, err := ipc.Decode([]byte(fixture.CensusLines(t)[1]))
	if err != nil {
		t.Fatal(err)
	}
	m.Seq, m.T = 1, 2
	m.Census.Holders[0].Name = strings.Repeat("é", 40) // 80 bytes
	q.Put(session.Event{At: at.Add(time.Second), Conn: 1, Msg: m})
	fams := scrape(t, e.Handler())
	want := m.Census.Holders[0].Bytes
	if got := value(t, fams, "vramscope_census_holder_bytes", map[string]string{"holder": strings.Repeat("é", metrics.MaxHolderLabel/2)}); got != float64(want) {
		t.Fatalf("largest holder: %v, want %d", got, want)
	}
	if n := len(fams["vramscope_census_holder_bytes"].Metric); n != 1 {
		t.Fatalf("%d holder series, want one per process", n)
	}
}
