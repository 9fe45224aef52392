package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// batchGCPercent is report's garbage-collector target: a one-shot batch
// read trades heap for collector time. On a 1M-step recording (bench/million,
// 2.5 GB, 2 idle cores) GOGC 100 took 10.4-10.7 s and 78 MB; 200 took 9.3 s
// and 105 MB, inside the 10 s and 150 MB a report of a
// million steps may take (400: 8.3 s but 175 MB).
const batchGCPercent = 200

// batchHeadroom caps what report's heap may hold beyond its live data.
// GOGC 200 lets the heap grow to three times the live heap: 105 MB for a
// report of a million steps, but 1.1 GB for 64 busy ranks, whose store
// keeps about 360 MB. Their report allocates about 650 MB in all, so a
// headroom of 80 MiB is a collection per 40-60 MB allocated once the store
// is full (24 in all), and the process holds its live heap plus about
// 100 MB: on those 64 ranks (bench/million/README.md) 457-461 MB and
// 12.7 s of user CPU, against 471-476 MB and 12.2-12.9 s at 96 MiB (20
// collections) and 1.34 GB uncapped (GOGC 200 alone): the bound such a
// report may hold is 500 MB. The cap follows the live heap, so a report
// whose store outgrows any fixed limit never makes the collector run back
// to back; a small report (a million steps) never reaches it.
const batchHeadroom = 80 << 20

// batchGC sets batchGCPercent and batchHeadroom, unless the user chose
// GOGC (both left alone) or GOMEMLIMIT (the headroom left alone).
func batchGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(batchGCPercent)
	if os.Getenv("GOMEMLIMIT") == "" {
		capOnce.Do(capHeadroom)
	}
}

// gcCycle is an object whose cleanup runs once a collection found it
// unreachable: after every collection, as capHeadroom re-arms it. It is
// larger than the runtime's 16-byte tiny objects, whose cleanups may never
// run.
type gcCycle struct{ _ [32]byte }

// capOnce arms capHeadroom once a process (a test runs report many times).
var capOnce sync.Once

// capHeadroom sets the memory limit to the live heap plus batchHeadroom
// after every collection, for the rest of the process.
func capHeadroom() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		runtime.AddCleanup(new(gcCycle), func(struct{}) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				debug.SetMemoryLimit(int64(sample[0].Value.Uint64()) + batchHeadroom)
			}
			arm()
		}, struct{}{})
	}
	arm()
}
