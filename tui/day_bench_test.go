package tui

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// BenchmarkStoreDay feeds one store a simulated 24-hour session at the
// default rates (the demo generator: 50 Hz samples, five phases per
// 0.41 s step; NVML every 100 ms with the process list every second),
// message by message as the live path does, and reports the live heap
// and the process's resident memory at 1, 6, 12 and 24 h. It takes about
// a minute: run it alone,
//
//	go test ./tui -run XXX -bench StoreDay -benchtime 1x
//
// Target: bounded, resident memory ≤ 150 MB after 24 h.
func BenchmarkStoreDay(b *testing.B) {
	for i := 0; i < b.N; i++ {
		storeDay(b, 24*time.Hour)
	}
}

func storeDay(b *testing.B, length time.Duration) {
	sc, err := demo.Lookup("warmup")
	if err != nil {
		b.Fatal(err)
	}
	gen := demo.NewGenerator(sc, demo.Config{Steps: 1 << 30})
	st := session.New()
	var now time.Time
	sim := probe.NewSimulated(probe.WithSimClock(func() time.Time { return now }))
	var buf []probe.Sample
	var clock *ipc.Clock
	var start, nextDev, nextProc time.Time
	checks := []time.Duration{time.Hour, 6 * time.Hour, 12 * time.Hour, length}
	for len(checks) > 0 {
		msgs := gen.Next(nil) // fresh messages per step: the store keeps pointers into them
		for i := range msgs {
			m := &msgs[i]
			if m.Clock != nil {
				clock = m.Clock
			}
			at := wallOf(clock, m.T)
			if start.IsZero() {
				start, nextDev, nextProc = at, at, at
			}
			for !at.Before(nextDev) {
				now = nextDev
				withProc := !now.Before(nextProc)
				buf, _ = sim.Sample(buf, withProc)
				smp := buf[0].Clone()
				st.Apply(session.Event{At: now, GPU: &smp})
				nextDev = nextDev.Add(probe.DefaultDeviceInterval)
				if withProc {
					nextProc = nextProc.Add(probe.DefaultProcessInterval)
				}
			}
			if m.Mem != nil {
				sim.OnMem(0, at, m.Mem.Reserved)
			}
			st.Apply(session.Event{At: at, Conn: 1, Msg: m})
		}
		if at := st.Last().Sub(start); at >= checks[0] {
			heap, rss := memNow()
			p := st.Processes()[0]
			b.Logf("%5s: heap in use %4d MiB, RSS %4d MiB; %d spans, %d steps, %d step peaks, %d anatomies, %d marks",
				durName(checks[0]), heap>>20, rss>>20, len(p.Spans()), len(p.Steps()), len(p.StepPeaks()), len(p.Anatomies), len(p.Marks))
			checks = checks[1:]
			if len(checks) == 0 {
				b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(rss)/(1<<20), "RSS-MiB")
			}
		}
	}
	runtime.KeepAlive(st)
}

// memNow is the live heap after a collection, and the resident set size.
func memNow() (heap, rss uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = ms.HeapInuse
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return heap, rss
}
