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
	"sync"
	"syscall"
	"time"
)

// ErrInUse reports that a live monitor already listens on the socket path.
// Listen wraps it: "another vramscope is listening on PATH".
var ErrInUse = errors.New("another vramscope is listening")

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
}

// Server accepts hook connections on a Unix socket and decodes their lines.
// Create one with Listen, run it with Serve, stop it with Close.
type Server struct {
	path        string
	logf        func(format string, args ...any)
	now         func() time.Time
	maxConns    int
	dialTimeout time.Duration

	ln *net.UnixListener
	fi fs.FileInfo // the socket file we created, to remove only our own

	mu      sync.Mutex
	conns   map[uint64]net.Conn
	nextID  uint64
	closed  bool
	serving bool
	wg      sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
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
		conns:       make(map[uint64]net.Conn),
	}
	for _, o := range opts {
		o(s)
	}
	if s.path == "" {
		s.path = DefaultSocketPath()
	}
	if len(s.path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes long, the limit is %d; choose a shorter one", s.path, len(s.path), maxSocketPath)
	}
	if err := prepareDir(dirOf(s.path)); err != nil {
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

	err := s.acceptLoop(deliver)
	s.Close()
	s.wg.Wait()
	return err
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
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		if len(s.conns) >= s.maxConns {
			s.mu.Unlock()
			s.logf("refused a connection on %s: already %d connections open (the limit)", s.path, s.maxConns)
			c.Close()
			continue
		}
		s.nextID++
		id := s.nextID
		s.conns[id] = c
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c, id, deliver)
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

// handle reads one connection's lines until it ends.
func (s *Server) handle(c net.Conn, id uint64, deliver func(Delivery)) {
	var endErr error
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, id)
		closed := s.closed
		s.mu.Unlock()
		if closed {
			endErr = nil // we cut it; that is no fault of the peer
		}
		deliver(Delivery{Conn: id, At: s.now(), Kind: Disconnected, Err: endErr})
		s.wg.Done()
	}()
	deliver(Delivery{Conn: id, At: s.now(), Kind: Connected})

	r := bufio.NewReaderSize(c, MaxMessageBytes)
	hello := false
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			n := len(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				n += len(line)
			}
			s.reject(id, deliver, fmt.Errorf("%w (%d bytes skipped)", ErrTooLong, n))
			if err != nil {
				endErr = readEnd(err)
				return
			}
			continue
		}
		if err != nil {
			if len(line) > 0 && !s.isClosed() {
				s.reject(id, deliver, fmt.Errorf("connection closed mid-line (%d bytes without newline skipped)", len(line)))
			}
			endErr = readEnd(err)
			return
		}
		m, derr := Decode(line)
		switch {
		case derr != nil:
			s.reject(id, deliver, derr)
		case !hello && m.Type != TypeHello:
			s.reject(id, deliver, fmt.Errorf("%w (type %q, seq %d)", errBeforeHello, m.Type, m.Seq))
		default:
			if m.Type == TypeHello {
				hello = true
			}
			deliver(Delivery{Conn: id, At: s.now(), Kind: Received, Msg: m})
		}
	}
}

// readEnd turns the error that ended a read into the Disconnected cause.
func readEnd(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("read: %w", err)
}

func (s *Server) reject(id uint64, deliver func(Delivery), err error) {
	s.logf("conn %d: %s", id, oneLine(err))
	deliver(Delivery{Conn: id, At: s.now(), Kind: Rejected, Err: err})
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
			conns = append(conns, c)
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
