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
// report of a million steps, but 1.3 GB for 64 busy ranks, whose store
// keeps about 340 MB. Their report allocates about 1.1 GB in all, so a
// headroom of 96 MiB is a collection per 60-90 MB allocated once the store
// is full, and the process holds its live heap plus about 140 MB: on those
// 64 ranks (bench/million/README.md) 480 MB and 16.1 s of CPU, against
// 506 MB and 15.7 s at 128 MiB, 549 MB and 15.3 s at 192 MiB, 1.34 GB and
// 14.6 s uncapped. The cap follows the live heap, so a report whose store
// outgrows any fixed limit never makes the collector run back to back; a
// small report (a million steps) never reaches it.
const batchHeadroom = 96 << 20

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
