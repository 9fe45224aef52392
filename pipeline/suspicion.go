package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
	"github.com/vramscope/vramscope/suspect"
)

// Suspicion asks the hooks that srv serves for a census of their live
// tensors when their diagnosis gives cause (suspect.Asker), and puts each
// request into the feed, so that the recording keeps it.
type Suspicion struct {
	queue *feed.Feed // the asker's own feed, fed by the tap
	asker *suspect.Asker
	f     atomic.Pointer[feed.Feed]
}

// NewSuspicion prepares the asker of srv's hooks; FeedOption taps the feed
// for it, Start runs it. captureDir is where a CUDA hook asked on suspicion
// writes its allocator history (the recording's directory, "" for none).
func NewSuspicion(srv *ipc.Server, captureDir string) *Suspicion {
	s := &Suspicion{queue: feed.New(feed.WithLimit(suspect.QueueLimit))}
	s.asker = suspect.New(s.queue, srv.Ask, func(ev session.Event) {
		if f := s.f.Load(); f != nil {
			f.Put(ev)
		}
	})
	s.asker.CaptureDir = captureDir
	return s
}

// FeedOption is the tap that feeds the asker's own store.
func (s *Suspicion) FeedOption() feed.Option { return feed.WithTap(s.queue.Put) }

// Ask queues a census request for the process with session key process
// (the TUI's c key).
func (s *Suspicion) Ask(process string) error { return s.asker.Ask(process) }

// Start runs the asker until ctx is done, its requests recorded through f.
func (s *Suspicion) Start(ctx context.Context, f *feed.Feed) {
	s.f.Store(f)
	go s.asker.Run(ctx)
}
