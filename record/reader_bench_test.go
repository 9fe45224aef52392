package record

import (
	"io"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRead measures the reader on a minute of the default-rate mix
// (see benchMix), plain and gzip, and reports events/s. This is the cost
// that bounds a replay's seek back: it reads the file again from the top.
func BenchmarkRead(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	for _, name := range []string{"plain", "gzip"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.jsonl")
			if strings.HasPrefix(name, "gzip") {
				path += ".gz"
			}
			w, err := Create(path, Header{Tool: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			for s := 0; s < 60; s++ {
				for _, e := range benchMix(b, s, rng) {
					if err := w.Write(e); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			events := 0
			for i := 0; i < b.N; i++ {
				r, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					events++
				}
				r.Close()
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
