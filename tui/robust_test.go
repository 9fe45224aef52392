package tui

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// Whatever a hook sends that the protocol accepts, the views render it:
// extreme times (the protocol's limit of 1e9 s), sizes and step numbers,
// messages out of order.
func TestExtremeValuesRender(t *testing.T) {
	valid, err := os.ReadFile("../testdata/protocol/valid.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(valid), []byte("\n"))
	extreme := [][]byte{
		lines[0], // hello
		[]byte(`{"v":1,"type":"phase","seq":1,"t":1e9,"name":"forward","step":9007199254740991,"edge":"begin","mem":{"allocated":9007199254740991,"max_allocated":9007199254740991,"reserved":0,"max_reserved":0}}`),
		[]byte(`{"v":1,"type":"sample","seq":2,"t":0,"mem":{"allocated":0,"max_allocated":0,"reserved":9007199254740991,"max_reserved":9007199254740991}}`),
		[]byte(`{"v":1,"type":"phase","seq":3,"t":1e9,"name":"forward","step":9007199254740991,"edge":"end","mem":null}`),
		[]byte(`{"v":1,"type":"anatomy","seq":4,"t":5,"step":0,"weights":9007199254740991,"gradients":0,"optimizer":0,"activations":9007199254740991,"batch_size":0,"params":0,"device":"cuda"}`),
	}
	for name, set := range map[string][][]byte{"fixtures": lines, "extreme": extreme} {
		var evs []session.Event
		at := time.Unix(1_763_794_800, 0)
		for _, l := range set {
			m, err := ipc.Decode(l)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			at = at.Add(time.Millisecond)
			evs = append(evs, session.Event{At: at, Conn: 1, Msg: m})
		}
		for _, size := range [][2]int{{80, 24}, {200, 60}} {
			m := live(t, evs, size[0], size[1])
			m = press(t, m, "-", "-", "-", "-", "-", "-", "-", "-", "+", "left", "right", "tab", "up", "?")
			if v := m.View(); v == "" {
				t.Errorf("%s at %v: empty view", name, size)
			}
			for _, k := range []string{"d", "end", "pgup", "a", "down", "esc"} { // the pages too
				if m = press(t, m, k); m.View() == "" {
					t.Errorf("%s at %v: empty view after %s", name, size, k)
				}
			}
		}
	}
}
