package tui

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// pacedFile is what `vramscope replay` streams (wire.go's pacedReader): a
// recording's events, paced by the timeline.
type pacedFile struct {
	r     *record.Reader
	pacer session.Pacer
}

func (p *pacedFile) Next() (session.Event, error) {
	ev, err := p.r.Next()
	if err != nil {
		return ev, err
	}
	if ev.Msg != nil {
		ev.Msg.Raw = nil
	}
	p.pacer.Pace(&ev)
	return ev, nil
}

func (p *pacedFile) Close() error { return p.r.Close() }

// BenchmarkSeekBackFromEnd measures a seek back from the end of the
// recording named by $VRAMSCOPE_SEEK_FILE (skipped without it), as the
// replay's reader goroutine does it: from opening the file to the rebuilt
// store handed to the model, with the target one second before the end.
//
//	VRAMSCOPE_SEEK_FILE=/tmp/h1.jsonl.gz go test ./tui -run XXX -bench SeekBack -benchtime 1x
func BenchmarkSeekBackFromEnd(b *testing.B) {
	path := os.Getenv("VRAMSCOPE_SEEK_FILE")
	if path == "" {
		b.Skip("set VRAMSCOPE_SEEK_FILE to a recording")
	}
	open := func() (ReplayStream, error) {
		r, err := record.Open(path)
		if err != nil {
			return nil, err
		}
		return &pacedFile{r: r}, nil
	}
	s := &replayStream{open: open, ctx: context.Background()}
	end, ok := s.scan()().(replayEndMsg)
	if !ok || end.end.IsZero() {
		b.Fatal("the scan found no end")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch := make(chan replayMsg, streamAhead)
		ctx, cancel := context.WithCancel(context.Background())
		go readStream(ctx, open, 1, ch, &rebuild{until: end.end.Add(-time.Second)})
		for m := range ch {
			if m.err != nil && m.err != io.EOF {
				b.Fatal(m.err)
			}
			if m.store != nil {
				break
			}
		}
		cancel()
		for range ch {
		}
	}
}
