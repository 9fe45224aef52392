package tui

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/session"
)

// hostEvents is a demo run as a CPU run's hook sends it (demo.Config's
// Host), still running.
func hostEvents(t *testing.T, steps int) []session.Event {
	t.Helper()
	msgs := demo.Generate(mustDemo(t, "warmup"), demo.Config{Steps: steps, Host: true})
	evs := make([]session.Event, 0, len(msgs))
	for i := range msgs {
		evs = append(evs, session.Event{At: wallOf(msgs[0].Clock, msgs[i].T), Conn: 1, Msg: &msgs[i]})
	}
	return evs[:len(evs)-1]
}

func mustDemo(t *testing.T, name string) demo.Scenario {
	t.Helper()
	sc, err := demo.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// A CPU run speaks of host memory everywhere on screen: the chart draws
// the RSS and its peak (not three copies of one figure), and the anatomy
// names the rest of the RSS and leaves out what host memory has no source
// for, instead of "unknown (no source yet)".
func TestHostRunSpeaksOfHostMemory(t *testing.T) {
	v := live(t, hostEvents(t, 8), 160, 48).View()
	for _, want := range []string{"━ RSS ", "━ peak RSS ", "rest of process", "= RSS", "MiB of host RSS"} {
		if !strings.Contains(v, want) {
			t.Errorf("no %q:\n%s", want, v)
		}
	}
	for _, no := range []string{"━ res ", "━ reserved ", "other/temporaries", "allocator cache", "non-PyTorch", "no source yet", "NVML process"} {
		if strings.Contains(v, no) {
			t.Errorf("a CPU run shows %q:\n%s", no, v)
		}
	}
}

// A 0.25 GiB process (a real CPU run, testdata/recordings/cpu_accum4.py)
// is charted in MiB: its axis read 0.1, 0.2 GiB.
func TestSmallProcessIsChartedInMiB(t *testing.T) {
	evs := recording(t, "../testdata/recordings/cpu_accum4.jsonl.gz")
	v := live(t, evs, 120, 40).View()
	if !strings.Contains(v, "Memory (MiB)") || strings.Contains(v, "Memory (GiB)") {
		t.Errorf("a 248 MiB process's chart is not in MiB:\n%s", firstLines(v, 8))
	}
	if !strings.Contains(v, "━ RSS 24") {
		t.Errorf("the legend does not give the RSS in MiB:\n%s", firstLines(v, 8))
	}
}
