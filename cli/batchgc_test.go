package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// After a collection the memory limit is the live heap plus batchHeadroom.
func TestHeadroomFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetMemoryLimit(math.MaxInt64)
	capOnce.Do(capHeadroom)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the cleanup runs on its own goroutine
		if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
			if limit < batchHeadroom || limit > batchHeadroom+1<<30 {
				t.Fatalf("memory limit %d, want the live heap plus %d", limit, batchHeadroom)
			}
			return
		}
	}
	t.Fatal("no memory limit set after a collection")
}
