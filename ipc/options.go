package ipc

import "time"

// Option configures a Server; pass options to Listen.
type Option func(*Server)

// DefaultMaxConns is how many hook connections a Server serves at once
// unless WithMaxConns says otherwise: room for a large multi-GPU node.
const DefaultMaxConns = 256

// WithSocketPath sets the socket's path. The default is DefaultSocketPath().
func WithSocketPath(path string) Option {
	return func(s *Server) { s.path = path }
}

// WithLogf sets where the server reports one-line problems (bad lines,
// refused connections). The default discards them. logf is called from
// many goroutines at once and must be safe for that.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(s *Server) {
		if logf != nil {
			s.logf = logf
		}
	}
}

// WithClock sets the clock that stamps Delivery.At. The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Server) {
		if now != nil {
			s.now = now
		}
	}
}

// WithMaxConns caps the number of connections served at once (default
// DefaultMaxConns). A connection over the cap is closed at once and logged.
func WithMaxConns(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxConns = n
		}
	}
}

// WithDialTimeout sets how long Listen waits when it probes an existing
// socket to tell a live monitor from a stale file (default 500ms).
func WithDialTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.dialTimeout = d
		}
	}
}

// WithHelloTimeout sets how long a new connection may take to say hello
// before it is closed (default DefaultHelloTimeout).
func WithHelloTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.helloWait = d
		}
	}
}

// WithIdleTimeout sets how long a connection that said hello may send
// nothing before it is closed (default DefaultIdleTimeout).
func WithIdleTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.idleWait = d
		}
	}
}

// WithAskHandler makes the server take an ask line (TypeAsk, vramscope
// census) in place of a hello: it calls ask with the pid, answers with one
// line and closes the connection. ask must not block.
func WithAskHandler(ask func(pid int) error) Option {
	return func(s *Server) { s.onAsk = ask }
}

// WithPeerUID sets the only uid whose connections are served (default: the
// monitor's effective uid). Tests use it to stand in for another user.
func WithPeerUID(uid int) Option {
	return func(s *Server) { s.uid = uid }
}

// WithRejectReports sets how many bad lines, of all connections together,
// are reported (logged and delivered) before reports come one every
// second, each with the count held back since (default 10). Every bad line
// is counted either way.
func WithRejectReports(burst int) Option {
	return func(s *Server) {
		if burst > 0 {
			s.rejectLim = newLimiter(burst, rejectEvery)
		}
	}
}
