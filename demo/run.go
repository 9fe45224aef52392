package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/vramscope/vramscope/ipc"
)

// dialRetry is how often Run retries a monitor that is not listening yet.
const dialRetry = 50 * time.Millisecond

// goodbyeTimeout bounds the goodbye write after a cancellation.
const goodbyeTimeout = time.Second

// cancelGrace is how long a write in progress may go on after a
// cancellation before it is cut.
const cancelGrace = 250 * time.Millisecond

// Run plays sc against the monitor listening on socketPath: one hook client
// per rank (WithRanks), each on its own connection, sending the generated
// messages as newline-delimited JSON, paced in real time (WithSpeed). It
// retries the connection for a while if nothing listens yet (WithDialTimeout).
// It returns nil when every rank has run its steps (WithSteps) and said
// goodbye, or when ctx is cancelled: each rank then flushes what it has
// generated, says goodbye (best effort) and hangs up. It returns an error
// when the options are invalid, when no monitor comes up, or when a send
// fails; a failing rank stops the others.
func Run(ctx context.Context, socketPath string, sc Scenario, opts ...Option) error {
	s := defaults()
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if err := s.check(); err != nil {
		return err
	}
	if socketPath == "" {
		return errors.New("demo: socket path is empty")
	}
	start := time.Now()
	if s.wall.IsZero() {
		s.wall = start
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex // serializes the callbacks
		wg   sync.WaitGroup
		errs = make([]error, s.ranks)
	)
	for r := range s.ranks {
		p := &player{
			path: socketPath, rank: r, s: &s, start: start, mu: &mu,
			gen: NewGenerator(sc, Config{Rank: s.firstRank + r, WorldSize: max(s.worldSize, s.firstRank+s.ranks),
				Wall: s.wall, HostName: s.host, Job: s.job}),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[r] = p.run(ctx); errs[r] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// player is one rank's hook client.
type player struct {
	path  string
	rank  int
	s     *settings
	start time.Time
	mu    *sync.Mutex
	gen   *Generator

	conn  net.Conn
	w     *bufio.Writer
	last  ipc.Message // last message written
	sent  bool        // whether last is set
	timer *time.Timer
}

func (p *player) run(ctx context.Context) error {
	defer p.exited()
	conn, err := dial(ctx, p.path, p.s.dialTimeout)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("demo rank %d: %w", p.rank, err)
	}
	defer conn.Close()
	p.conn, p.w = conn, bufio.NewWriterSize(conn, 32<<10)

	// A cancellation unblocks a write stuck on a monitor that stopped reading,
	// after a grace that lets a write in progress on a monitor that reads
	// finish its line (a deadline of now cut lines in half, which the
	// monitor then rejects: TestRunStopsOnCancel saw it under load).
	unblocked := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		conn.SetWriteDeadline(time.Now().Add(cancelGrace))
		close(unblocked)
	})
	var buf []ipc.Message
	for p.s.steps == 0 || p.gen.Steps() < p.s.steps {
		buf = p.gen.Next(buf[:0])
		for i := range buf {
			if err := p.wait(ctx, buf[i].T); err != nil || ctx.Err() != nil {
				return p.cancelled(stop, unblocked)
			}
			if err := p.send(&buf[i]); err != nil {
				if ctx.Err() != nil {
					return p.cancelled(stop, unblocked)
				}
				return err
			}
		}
	}
	stop()
	bye := p.gen.Goodbye("exit")
	if err := p.send(&bye); err != nil {
		return err
	}
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("demo rank %d: send to %s: %w", p.rank, p.path, err)
	}
	return nil
}

// cancelled flushes what was written and says goodbye right after it. A
// failure here is not an error: the monitor may be the one going away.
func (p *player) cancelled(stop func() bool, unblocked <-chan struct{}) error {
	if !stop() {
		<-unblocked // the deadline is set; now it can be moved
	}
	if !p.sent {
		return nil // not even the hello went out: nothing to end
	}
	p.conn.SetWriteDeadline(time.Now().Add(goodbyeTimeout))
	line, err := json.Marshal(goodbyeAfter(p.last, "exit"))
	if err != nil {
		return nil
	}
	line = append(line, '\n')
	if p.w.Flush() != nil {
		// A write was cut short mid-line: end that line so that only it is
		// lost, then send the goodbye past the broken buffer.
		line = append([]byte{'\n'}, line...)
	}
	p.conn.Write(line)
	return nil
}

// wait sleeps until the message at virtual time t is due, flushing what is
// buffered first so the monitor sees it on time. It returns ctx's error if
// cancelled meanwhile.
func (p *player) wait(ctx context.Context, t float64) error {
	if p.s.speed == 0 {
		return nil
	}
	d := time.Until(p.start.Add(time.Duration(float64(virtual(t)) / p.s.speed)))
	if d <= 0 {
		return nil
	}
	if err := p.w.Flush(); err != nil {
		return nil // send reports it
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		p.timer.Stop()
		return ctx.Err()
	case <-p.timer.C:
		return nil
	}
}

// send checks m, writes it as one line and reports its snapshot.
func (p *player) send(m *ipc.Message) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("demo rank %d: generated an invalid %s message (seq %d): %w", p.rank, m.Type, m.Seq, err)
	}
	line, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("demo rank %d: encode %s message: %w", p.rank, m.Type, err)
	}
	if len(line)+1 > ipc.MaxMessageBytes {
		return fmt.Errorf("demo rank %d: %s message: %w", p.rank, m.Type, ipc.ErrTooLong)
	}
	p.w.Write(line)
	if err := p.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("demo rank %d: send to %s: %w", p.rank, p.path, err)
	}
	p.last, p.sent = *m, true
	if m.Mem != nil && p.s.onMem != nil {
		p.mu.Lock()
		p.s.onMem(p.rank, p.s.wall.Add(virtual(m.T)), *m.Mem)
		p.mu.Unlock()
	}
	return nil
}

func (p *player) exited() {
	if p.s.onExit != nil {
		p.mu.Lock()
		p.s.onExit(p.rank)
		p.mu.Unlock()
	}
}

// virtual is the time since the hello of a message at monotonic time t.
func virtual(t float64) time.Duration {
	return time.Duration(math.Round(t*1e6)-float64(monoStart)) * time.Microsecond
}

// dial connects to path, retrying every dialRetry for up to timeout while
// nothing listens there.
func dial(ctx context.Context, path string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("connect to %s: no vramscope listening after %s: %w", path, timeout, err)
		}
		t := time.NewTimer(min(dialRetry, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
