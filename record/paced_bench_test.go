package record

import (
	"context"
	"os"
	"testing"
)

// BenchmarkPacedEnd compares the full read (Next and a Pacer, what a
// replay's scan for its length did) with PacedEnd, on a demo recording or
// on $VRAMSCOPE_PACED_BENCH (use -benchtime=1x for a day-long one).
func BenchmarkPacedEnd(b *testing.B) {
	path := os.Getenv("VRAMSCOPE_PACED_BENCH")
	if path == "" {
		path = demoRecording(b)
	}
	b.Run("full", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fullPacedEndOf(b, path)
		}
	})
	b.Run("light", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := PacedEnd(context.Background(), path); err != nil {
				b.Fatal(err)
			}
		}
	})
}
