package ipc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// ErrInUse reports that a live monitor already listens on the socket path.
// Listen wraps it: "another vramscope is listening on PATH".
var ErrInUse = errors.New("another vramscope is listening")

// errMidLine ends a connection whose peer closed it in the middle of a
// line: a hook whose send timed out does.
var errMidLine = errors.New("closed mid-line")

// errBeforeHello rejects a message that arrives before its connection's hello.
var errBeforeHello = errors.New("message before hello")

// Kind says what a Delivery reports.
type Kind uint8

// Delivery kinds.
const (
	Received     Kind = iota // a good message: Msg is set
	Rejected                 // a bad line, skipped: Err says why (one line)
	Connected                // a hook connected
	Disconnected             // a connection ended: Err is the cause, nil for a clean close
	Refused                  // a connection was refused (the limit): Conn is 0, Err says why
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Received:
		return "received"
	case Rejected:
		return "rejected"
	case Connected:
		return "connected"
	case Disconnected:
		return "disconnected"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Delivery is one thing a connection produced: a message, a rejected line,
// or the connection opening or closing.
type Delivery struct {
	// Conn identifies the connection: unique per Server, counting from 1.
	Conn uint64
	// At is when the server read the line or saw the event (WithClock).
	At time.Time
	// Kind says which of the fields below is meaningful.
	Kind Kind
	// Msg is the decoded, validated message (Received).
	Msg *Message
	// Err is why a line was rejected (Rejected) or why the connection ended
	// (Disconnected; nil when the peer closed it cleanly or the server shut
	// down). Its text is one line.
	Err error
	// Skipped is, for Rejected, how many more bad lines this report stands
	// for: reports are rate-limited, the count is not.
	Skipped uint64
}

// Server accepts hook connections on a Unix socket and decodes their lines.
// Create one with Listen, run it with Serve, stop it with Close.
type Server struct {
	path        string
	logf        func(format string, args ...any)
	now         func() time.Time
	maxConns    int
	dialTimeout time.Duration
	helloWait   time.Duration // a connection must say hello within this
	idleWait    time.Duration // and then send a line at least this often
	uid         int           // the only peer uid served (SO_PEERCRED)

	turns  chan struct{} // fair share of decoding: see takeTurn
	logLim *limiter      // server-wide log lines (refusals, timeouts)
	// rejectLim is the reports of bad lines, for all connections together:
	// a budget per connection let 3,000 short ones make 30,000 reports.
	rejectLim *limiter

	ln *net.UnixListener
	fi fs.FileInfo // the socket file we created, to remove only our own

	mu      sync.Mutex
	conns   map[uint64]*conn
	freed   chan struct{} // a connection ended (room waits on it)
	nextID  uint64
	closed  bool
	serving bool
	wg      sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	onAsk func(pid int) error // WithAskHandler
}

// Listen prepares the socket directory (0700, ours), clears a stale socket
// left by a crashed monitor, and listens (socket mode 0600). It fails with
// an error wrapping ErrInUse when another monitor is live on the path, and
// never deletes a file at the path that is not a socket.
func Listen(opts ...Option) (*Server, error) {
	s := &Server{
		logf:        func(string, ...any) {},
		now:         time.Now,
		maxConns:    DefaultMaxConns,
		dialTimeout: 500 * time.Millisecond,
		helloWait:   DefaultHelloTimeout,
		idleWait:    DefaultIdleTimeout,
		uid:         os.Geteuid(),
		conns:       make(map[uint64]*conn),
		freed:       make(chan struct{}, 1),
		logLim:      newLimiter(logBurst, logEvery),
		rejectLim:   newLimiter(rejectBurst, rejectEvery),
	}
	for _, o := range opts {
		o(s)
	}
	s.turns = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	if s.path == "" {
		s.path = DefaultSocketPath()
	}
	if len(s.path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes long, the limit is %d; choose a shorter one", s.path, len(s.path), maxSocketPath)
	}
	if err := prepareDir(dirOf(s.path), filepath.Base(s.path)); err != nil {
		return nil, err
	}
	if err := clearStale(s.path, s.dialTimeout); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.path, err)
	}
	ln.SetUnlinkOnClose(false) // Close removes the file only if it is still ours
	s.ln = ln
	if err := os.Chmod(s.path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("set mode 0600 on %s: %w", s.path, err)
	}
	if s.fi, err = os.Lstat(s.path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("stat %s: %w", s.path, err)
	}
	return s, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Serve accepts connections until ctx is done or Close is called, then
// closes the listener and every connection, waits for their goroutines and
// returns nil. Each connection is read by its own goroutine, so deliver is
// called from many goroutines at once: it must be safe for concurrent use
// and fast (hand the Delivery on; do no I/O), since a slow deliver stalls
// that connection. The Deliveries of one connection are made in order from
// one goroutine: Connected first, Disconnected last. deliver is never called
// after Serve returns. Serve may be called only once.
func (s *Server) Serve(ctx context.Context, deliver func(Delivery)) error {
	s.mu.Lock()
	if s.serving || s.closed {
		s.mu.Unlock()
		return fmt.Errorf("serve on %s: server already serving or closed", s.path)
	}
	s.serving = true
	s.mu.Unlock()

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-stop:
		}
	}()

	go s.reportHeldRejects(stop, deliver)
	err := s.acceptLoop(deliver)
	s.Close()
	s.wg.Wait()
	s.flushRejects(deliver) // every bad line is counted, to the last
	return err
}

// reportHeldRejects reports, once every rejectEvery until stop closes, the
// bad lines held back since the last report, so the count is whole soon
// after a flood ends, whichever connection it came from.
func (s *Server) reportHeldRejects(stop <-chan struct{}, deliver func(Delivery)) {
	t := time.NewTicker(rejectEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.flushRejects(deliver)
		}
	}
}

// flushRejects delivers one report for the bad lines held back, if any.
func (s *Server) flushRejects(deliver func(Delivery)) {
	if n := s.rejectLim.take(); n > 0 {
		deliver(Delivery{At: s.now(), Kind: Rejected, Skipped: n - 1,
			Err: fmt.Errorf("%d more bad lines skipped without a report of their own (reports are limited to %d, then one every %v, for all connections together)", n, rejectBurst, rejectEvery)})
	}
}

func (s *Server) acceptLoop(deliver func(Delivery)) error {
	var backoff time.Duration
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if retryable(err) {
				// Out of file descriptors and the like: wait and retry.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("accept on %s: %v (retrying in %v)", s.path, err, backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accept on %s: %w", s.path, err)
		}
		backoff = 0
		if uid, ok := peerUID(c); ok && uid != s.uid {
			s.limitedLogf("refused a connection on %s from uid %d: only uid %d's hooks are served", s.path, uid, s.uid)
			c.Close()
			continue
		}
		if !s.room() {
			if s.closed {
				s.mu.Unlock()
				c.Close()
				return nil
			}
			s.mu.Unlock()
			err := fmt.Errorf("refused a connection on %s: already %d connections open (the limit), each has said hello", s.path, s.maxConns)
			s.limitedLogf("%v", err)
			c.Close()
			deliver(Delivery{At: s.now(), Kind: Refused, Err: err})
			continue
		}
		s.nextID++
		cn := &conn{c: c, id: s.nextID, opened: time.Now()}
		s.conns[cn.id] = cn
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(cn, deliver)
	}
}

// retryable reports whether an accept error is a passing shortage rather
// than a dead listener.
func retryable(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// handle reads one connection's lines until it ends. The connection must
// say hello within the hello timeout and then send a line at least every
// idle timeout (the hook sends stats every second); each line is decoded
// and delivered in a turn shared fairly with every other connection.
func (s *Server) handle(cn *conn, deliver func(Delivery)) {
	id := cn.id
	var endErr error
	defer func() {
		cn.c.Close()
		s.mu.Lock()
		delete(s.conns, id)
		closed := s.closed
		s.mu.Unlock()
		select {
		case s.freed <- struct{}{}:
		default:
		}
		switch {
		case closed:
			endErr = nil // we cut it; that is no fault of the peer
		case cn.evicted.Load():
			endErr = errEvicted
		}
		if endErr != nil && !closed {
			s.limitedLogf("conn %d closed: %s", id, oneLine(endErr))
		}
		deliver(Delivery{Conn: id, At: s.now(), Kind: Disconnected, Err: endErr})
		s.wg.Done()
	}()
	deliver(Delivery{Conn: id, At: s.now(), Kind: Connected})

	dl := deadline{c: cn.c, wait: s.helloWait}
	dl.arm(time.Now())
	r := bufio.NewReaderSize(cn.c, MaxMessageBytes)
	seq := seqCheck{}
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			n := len(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				dl.touch(time.Now()) // data flows: not idle
				line, err = r.ReadSlice('\n')
				n += len(line)
			}
			s.reject(id, deliver, fmt.Errorf("%w (%d bytes skipped)", ErrTooLong, n))
			if err != nil {
				endErr = s.readEnd(err, cn)
				return
			}
			continue
		}
		if err != nil {
			endErr = s.readEnd(err, cn)
			if len(line) > 0 && endErr == nil && !s.isClosed() {
				// A send cut short (the hook's timed out while this monitor
				// was stopped): not a bad message, the end of a connection.
				endErr = fmt.Errorf("%w (%d bytes without newline skipped)", errMidLine, len(line))
			}
			return
		}
		dl.touch(time.Now())
		s.takeTurn()
		m, derr := Decode(line)
		if derr == nil {
			derr = seq.check(m)
		}
		hello := cn.hello.Load()
		switch {
		case derr != nil:
			s.reject(id, deliver, derr)
		case !hello && m.Type == TypeAsk && s.onAsk != nil:
			s.answerAsk(cn, m)
			s.endTurn()
			return
		case !hello && m.Type != TypeHello:
			s.reject(id, deliver, fmt.Errorf("%w (type %q, seq %d)", errBeforeHello, m.Type, m.Seq))
		default:
			if m.Type == TypeHello && !hello {
				cn.hello.Store(true)
				dl.hello(time.Now(), s.idleWait)
			}
			deliver(Delivery{Conn: id, At: s.now(), Kind: Received, Msg: m})
		}
		s.endTurn()
	}
}

// readEnd turns the error that ended a read into the Disconnected cause.
func (s *Server) readEnd(err error, cn *conn) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if cn.hello.Load() {
			return fmt.Errorf("%w: no line for %v", ErrIdle, s.idleWait)
		}
		return fmt.Errorf("%w: no hello within %v", ErrIdle, s.helloWait)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("read: %w", err)
}

// reject reports a bad line: logged and delivered while the server's report
// budget lasts (rejectBurst, then one every rejectEvery, each with the count
// of those skipped since, on any connection), only counted beyond it, so a
// flood of bad lines, on one connection or many, cannot become a flood of
// log lines and recorded notes.
func (s *Server) reject(id uint64, deliver func(Delivery), err error) {
	ok, skipped := s.rejectLim.allow(time.Now())
	if !ok {
		return
	}
	if skipped > 0 {
		err = fmt.Errorf("%w (and %d more bad lines since the last report)", err, skipped)
	}
	s.logf("conn %d: %s", id, oneLine(err))
	deliver(Delivery{Conn: id, At: s.now(), Kind: Rejected, Err: err, Skipped: skipped})
}

// Close stops accepting, closes every connection and removes the socket
// file if it is still the one Listen created. It does not wait for the
// connection goroutines (Serve does). It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]net.Conn, 0, len(s.conns))
		for _, c := range s.conns {
			conns = append(conns, c.c)
		}
		s.mu.Unlock()
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = fmt.Errorf("close listener on %s: %w", s.path, err)
		}
		for _, c := range conns {
			c.Close()
		}
		if sameFile(s.path, s.fi) {
			if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) && s.closeErr == nil {
				s.closeErr = fmt.Errorf("remove socket %s: %w", s.path, err)
			}
		}
	})
	return s.closeErr
}
