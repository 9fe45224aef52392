package ipc

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The server's defences against idle, flooding and noisy peers
// (docs/architecture.md, "Faults"). Each figure is a promise the tests pin.
const (
	// DefaultHelloTimeout is how long a new connection may take to say
	// hello. The hook sends it in the same write as its connect.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultIdleTimeout is how long a connection that said hello may stay
	// silent. The hook sends stats every second while connected.
	DefaultIdleTimeout = 60 * time.Second

	// rejectBurst bad lines are reported (logged and delivered), then one
	// every rejectEvery with the count skipped since: for all connections
	// together.
	rejectBurst = 10
	rejectEvery = time.Second
	// logBurst server-wide log lines (refused peers, timeouts), then one
	// every logEvery with the count skipped since.
	logBurst = 20
	logEvery = time.Second
)

// ErrIdle ends a connection that did not say hello in time, or fell silent.
var ErrIdle = errors.New("connection timed out")

// errEvicted ends a connection that had not said hello when a new one
// arrived at a full server.
var errEvicted = errors.New("closed to make room for a new connection: the server was full and this one had not said hello")

// conn is one accepted connection.
type conn struct {
	c       *net.UnixConn
	id      uint64
	opened  time.Time
	hello   atomic.Bool // said hello: no longer evictable
	evicted atomic.Bool // closed by evictSilentLocked
	gone    bool        // the peer has hung up (room; s.mu held)
	wmu     sync.Mutex  // one request write at a time (Ask)
}

// evictGrace protects a connection younger than this from eviction: a
// hook's hello is on its way, and a storm of new connections must not push
// it out before it lands.
const evictGrace = 250 * time.Millisecond

// maxDraining bounds, as a multiple of the connection limit, the
// connections whose peer has gone while their last lines wait to be
// decoded: they do not count against the limit, but each holds a file and
// a read buffer of MaxMessageBytes. At 4 a flood of short-lived hooks with
// 60 KB hellos held 1,280 buffers, 80 MB, and the live view peaked at
// 210 MB; past the bound a new connection waits for one to end (room).
const maxDraining = 1

// room says whether a new connection may be served, and takes s.mu when
// it may. A connection whose peer has hung up (peerGone) sends nothing
// more: it holds no slot, though its buffered lines are still read. A
// burst of short-lived hooks was refused as "already 256 connections open"
// while few were, and lost its sessions. When only
// such draining connections fill the server, it waits for one to end (the
// new hook's lines wait in its socket meanwhile) instead of refusing; when
// live ones fill it, it evicts a silent one or refuses.
func (s *Server) room() bool {
	deadline := time.Now().Add(drainWait)
	for {
		s.mu.Lock()
		if s.closed {
			return false
		}
		if len(s.conns) < s.maxConns {
			return true
		}
		live := 0
		for _, c := range s.conns {
			if !c.gone && peerGone(c.c) {
				c.gone = true
			}
			if !c.gone {
				live++
			}
		}
		if live < s.maxConns && len(s.conns) < s.maxConns*(1+maxDraining) {
			return true
		}
		if live >= s.maxConns || time.Now().After(deadline) {
			return s.evictSilentLocked()
		}
		s.mu.Unlock()
		select {
		case <-s.freed:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// drainWait bounds how long a new connection waits for draining ones.
const drainWait = 5 * time.Second

// evictSilentLocked closes the oldest connection that has not said hello
// and whose peer is still there (one that hung up has lines to drain),
// making room at a full server: a hook says hello at once, so a connection
// without one is a stray or a squatter, and a real hook must never be shut
// out by them. It reports whether it made room. s.mu is held.
func (s *Server) evictSilentLocked() bool {
	var victim *conn
	young := time.Now().Add(-evictGrace)
	for _, c := range s.conns {
		if c.opened.After(young) {
			continue
		}
		if !c.hello.Load() && !c.evicted.Load() && !c.gone && (victim == nil || c.opened.Before(victim.opened)) {
			victim = c
		}
	}
	if victim == nil {
		return false
	}
	victim.evicted.Store(true)
	victim.c.Close()
	delete(s.conns, victim.id) // its goroutine's delete is then a no-op
	return true
}

// takeTurn waits for one of GOMAXPROCS decoding turns. The turns are handed
// out first come, first served (a channel's waiting senders queue in
// order), one line at a time, so with N busy connections each gets about
// 1/N of the decoding: a flood on some connections delays a hook's line by
// one line of each flooder at most, instead of starving it.
func (s *Server) takeTurn() { s.turns <- struct{}{} }

// endTurn gives the turn back.
func (s *Server) endTurn() { <-s.turns }

// limitedLogf logs through the server-wide limiter.
func (s *Server) limitedLogf(format string, args ...any) {
	ok, skipped := s.logLim.allow(time.Now())
	if !ok {
		return
	}
	if skipped > 0 {
		format += " (%d similar lines skipped)"
		args = append(args, skipped)
	}
	s.logf(format, args...)
}

// deadline keeps a connection's read deadline: fixed until its hello
// (lines before it do not buy time), then ahead of its last line, without
// a timer update per line: it is re-armed once a quarter of the wait has
// passed.
type deadline struct {
	c     net.Conn
	wait  time.Duration
	armed time.Time
	idle  bool // the hello came: each line moves the deadline
}

func (d *deadline) arm(now time.Time) {
	d.armed = now
	if d.wait > 0 {
		d.c.SetReadDeadline(now.Add(d.wait))
	}
}

// hello switches from the hello timeout to the idle timeout.
func (d *deadline) hello(now time.Time, idle time.Duration) {
	d.idle, d.wait = true, idle
	d.arm(now)
}

func (d *deadline) touch(now time.Time) {
	if d.idle && now.Sub(d.armed) >= d.wait/4 {
		d.arm(now)
	}
}

// limiter lets burst events through, then one every interval, and counts
// the ones it holds back. It is safe for concurrent use.
type limiter struct {
	mu       sync.Mutex
	burst    int
	every    time.Duration
	tokens   float64
	last     time.Time
	held     uint64 // held back since the last allowed event
	heldEver uint64 // held back in all
}

func newLimiter(burst int, every time.Duration) *limiter {
	return &limiter{burst: burst, every: every, tokens: float64(burst)}
}

// allow reports whether an event at now may go through and, if so, how
// many were held back since the last one that did.
func (l *limiter) allow(now time.Time) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(float64(l.burst), l.tokens+float64(now.Sub(l.last))/float64(l.every))
	}
	l.last = now
	if l.tokens < 1 {
		l.held++
		l.heldEver++
		return false, 0
	}
	l.tokens--
	n := l.held
	l.held = 0
	return true, n
}

// take returns how many events were held back and not yet reported, and
// counts them as reported.
func (l *limiter) take() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.held
	l.held = 0
	return n
}
