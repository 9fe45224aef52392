package pipeline

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
	"github.com/vramscope/vramscope/suspect"
)

// Suspicion asks the hooks a monitor serves for a census of their live
// tensors when their diagnosis gives cause (suspect.Asker), or when a user
// asks (the TUI's c key, vramscope census), and puts each request into the
// feed, so that the recording keeps it. Wiring: NewSuspicion, then
// ServerOption to ipc.Listen and FeedOption to feed.New, then Start.
type Suspicion struct {
	queue *feed.Feed // the asker's own feed, fed by the tap
	asker *suspect.Asker
	srv   atomic.Pointer[ipc.Server]
	f     atomic.Pointer[feed.Feed]
}

// errNotStarted answers a request that came before Start.
var errNotStarted = errors.New("the monitor is not serving yet")

// NewSuspicion prepares the asker. captureDir is where a CUDA hook asked
// on suspicion writes its allocator history (the recording's directory,
// "" for none).
func NewSuspicion(captureDir string) *Suspicion {
	s := &Suspicion{queue: feed.New(feed.WithLimit(suspect.QueueLimit))}
	ask := func(conn uint64, r ipc.Request) error {
		srv := s.srv.Load()
		if srv == nil {
			return errNotStarted
		}
		return srv.Ask(conn, r)
	}
	s.asker = suspect.New(s.queue, ask, func(ev session.Event) {
		if f := s.f.Load(); f != nil {
			f.Put(ev)
		}
	})
	s.asker.CaptureDir = captureDir
	return s
}

// ServerOption lets vramscope census ask through the monitor's socket.
func (s *Suspicion) ServerOption() ipc.Option { return ipc.WithAskHandler(s.asker.AskPID) }

// FeedOption is the tap that feeds the asker's own store.
func (s *Suspicion) FeedOption() feed.Option { return feed.WithTap(s.queue.Put) }

// Ask queues a census request for the process with session key process
// (the TUI's c key).
func (s *Suspicion) Ask(process string) error { return s.asker.Ask(process) }

// Start runs the asker until ctx is done: its requests go through srv and
// are recorded through f.
func (s *Suspicion) Start(ctx context.Context, srv *ipc.Server, f *feed.Feed) {
	s.srv.Store(srv)
	s.f.Store(f)
	go s.asker.Run(ctx)
}
