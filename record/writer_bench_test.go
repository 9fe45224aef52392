package record

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// Default rates of one rank on one GPU: hook samples at 50 Hz, ~10 phase
// edges per step at ~5 steps/s, NVML device samples at 10 Hz of which one a
// second carries the process list. mixPerSecond is their sum.
const (
	sampleHz     = 50
	edgesPerSec  = 10 * 5
	deviceHz     = 10
	mixPerSecond = sampleHz + edgesPerSec + deviceHz
)

// benchMix builds one second of realistic events (mixPerSecond of them),
// with allocator values that move as in training.
func benchMix(b testing.TB, second int, rng *rand.Rand) []session.Event {
	start := time.Unix(1763794800+int64(second), 0)
	var evs []session.Event
	seq := uint64(second * (sampleHz + edgesPerSec))
	phases := []string{"zero_grad", "forward", "loss", "backward", "step"}
	alloc := func() int64 { return 2<<30 + rng.Int63n(6<<30) }
	mem := func() string {
		a := alloc()
		return fmt.Sprintf(`{"allocated":%d,"max_allocated":%d,"reserved":%d,"max_reserved":%d,"alloc_retries":0,"ooms":0}`, a, a+rng.Int63n(1<<30), 10<<30, 10<<30)
	}
	add := func(at time.Time, line string) {
		m, err := ipc.Decode([]byte(line))
		if err != nil {
			b.Fatal(err)
		}
		evs = append(evs, session.Event{At: at, Conn: 1, Msg: m})
	}
	for i := 0; i < sampleHz; i++ {
		at := start.Add(time.Duration(i) * time.Second / sampleHz).Add(time.Duration(rng.Intn(1000)) * time.Microsecond)
		seq++
		add(at, fmt.Sprintf(`{"v":1,"type":"sample","seq":%d,"t":%.6f,"mem":%s}`, seq, 1000+float64(at.UnixMicro()%1e9)/1e6, mem()))
	}
	for i := 0; i < edgesPerSec; i++ {
		at := start.Add(time.Duration(i) * time.Second / edgesPerSec).Add(time.Duration(rng.Intn(1000)) * time.Microsecond)
		seq++
		edge := []string{"begin", "end"}[i%2]
		add(at, fmt.Sprintf(`{"v":1,"type":"phase","seq":%d,"t":%.6f,"name":%q,"step":%d,"micro":0,"edge":%q,"user":false,"mem":%s}`,
			seq, 1000+float64(at.UnixMicro()%1e9)/1e6, phases[i/2%5], second*5+i/10, edge, mem()))
	}
	for i := 0; i < deviceHz; i++ {
		at := start.Add(time.Duration(i) * time.Second / deviceHz)
		s := &probe.Sample{At: at, Device: "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f", Used: alloc() + 1<<30,
			Reserved: 512 << 20, Free: 70 << 30, Total: 85899345920, Util: rng.Intn(101), Took: time.Duration(150+rng.Intn(100)) * time.Microsecond}
		if i == 0 {
			s.Processes = []probe.Process{{PID: 4242, Used: s.Used - 1<<30}, {PID: 4243, Used: 1 << 30}}
		}
		evs = append(evs, session.Event{At: at, GPU: s})
	}
	return evs
}

// BenchmarkWrite measures the writer on the default-rate mix and reports
// events/s, bytes per event on disk and the resulting size of one hour of
// recording for one rank on one GPU.
func BenchmarkWrite(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var mix []session.Event
	for s := 0; s < 20; s++ {
		mix = append(mix, benchMix(b, s, rng)...)
	}
	// "-live" variants flush after every second's worth of events, as the
	// flusher does in a live recording; their size is the honest one.
	for _, name := range []string{"plain", "gzip", "plain-live", "gzip-live"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.jsonl")
			if strings.HasPrefix(name, "gzip") {
				path += ".gz"
			}
			live := strings.HasSuffix(name, "-live")
			w, err := Create(path, Header{Tool: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Write(mix[i%len(mix)]); err != nil {
					b.Fatal(err)
				}
				if live && i%mixPerSecond == mixPerSecond-1 {
					if err := w.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			c := w.Counters()
			if c.Events != uint64(b.N) {
				b.Fatalf("wrote %d events of %d", c.Events, b.N)
			}
			perEvent := float64(c.FileBytes) / float64(b.N)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(perEvent, "B/event")
			b.ReportMetric(perEvent*mixPerSecond*3600/1e6, "MB/hour")
		})
	}
}
