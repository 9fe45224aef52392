package record

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/session"
)

// TestAbsurdEventTimeIsSkipped: one line with "t": -1e300 or 1e300 made
// report --json exit 1 with no output (Time.MarshalJSON: year outside of
// range) and the text report print the year -290308 and a run of
// 9223372036 s. The event's own t is range-checked
// like the hook's: the line is skipped with a warning, by Next, by Each and
// by the paced reader's time parser.
func TestAbsurdEventTimeIsSkipped(t *testing.T) {
	good := `{"t":1763794800.250100,"conn":1,"note":{"kind":"connect","text":"pid 4242 connected"}}`
	for _, lit := range []string{"-1e300", "1e300", "-5", "4000000001", "99999999999999999999", "-0.5"} {
		file := absurdHeader + "\n" + good + "\n" + strings.Replace(good, "1763794800.250100", lit, 1) + "\n" + good + "\n"
		for _, each := range []bool{false, true} {
			r, err := NewReader("absurd", strings.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			var evs []session.Event
			if each {
				err = r.Each(func(ev session.Event) { evs = append(evs, ev) })
			} else {
				evs, err = drain(r)
			}
			if err != nil {
				t.Fatal(err)
			}
			w := r.Warnings()
			if len(evs) != 2 || len(w) != 1 || !strings.Contains(w[0], "line 3: field t") {
				t.Errorf("t=%s (Each %v): %d events, warnings %q; want 2 and one on line 3", lit, each, len(evs), w)
			}
			for _, ev := range evs {
				if ev.At.Year() != 2025 {
					t.Errorf("t=%s: an event at %v", lit, ev.At)
				}
			}
		}
		if _, err := lightTime([]byte(lit)); err == nil {
			t.Errorf("lightTime(%s) took it", lit)
		}
	}
	if _, err := lightTime([]byte("1763794800.25")); err != nil {
		t.Error(err)
	}
}

const absurdHeader = `{"vramscope_recording":1,"version":"1.0","created":"2025-11-22T07:00:00Z","tool":"test","host":"h","argv":[],"source":"live"}`

func drain(r *Reader) ([]session.Event, error) {
	var evs []session.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}
