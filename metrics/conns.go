package metrics

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// MaxHTTPConns bounds the connections the metrics port holds at once. A
// scraper needs one; idle keep-alive connections with no bound exhausted
// the monitor's file descriptors, and then hooks could not connect (issue
// 22, finding 2). At a low descriptor limit the bound is lower still:
// httpConnsFor keeps seven eighths of the descriptors for the hook socket,
// recordings and NVML.
const MaxHTTPConns = 64

// Timeouts of the metrics port: a request's header must arrive within
// 5 s, the whole request within 10 s, the answer be written within 30 s,
// and a keep-alive connection is closed after 60 s without a request (a
// scraper asks every 15 s to 1 min).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
)

// httpConnsFor is MaxHTTPConns, or an eighth of the soft descriptor limit
// when that is less (at least 4).
func httpConnsFor() int {
	soft, ok := softFileLimit()
	if !ok || soft == 0 {
		return MaxHTTPConns
	}
	return int(max(4, min(uint64(MaxHTTPConns), soft/8)))
}

// capListener holds at most max connections. When full, a new connection
// closes the one idle the longest: a keep-alive connection between
// requests, or one that has sent no request in silentGrace (a scraper
// sends its request at once). With none such, the new one is closed.
type capListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[net.Conn]*connInfo
}

type connInfo struct {
	idleSince time.Time // when it became idle or opened; zero while serving
}

// silentGrace is how long a new connection may stay silent before a
// newcomer may evict it.
const silentGrace = 250 * time.Millisecond

func newCapListener(ln net.Listener, max int) *capListener {
	return &capListener{Listener: ln, max: max, open: map[net.Conn]*connInfo{}}
}

// Accept returns the next connection that fits under the cap.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		l.mu.Lock()
		if len(l.open) >= l.max && !l.evictIdleLocked(now) {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[c] = &connInfo{idleSince: now.Add(silentGrace)}
		l.mu.Unlock()
		return c, nil
	}
}

// evictIdleLocked closes the connection idle the longest; l.mu is held.
func (l *capListener) evictIdleLocked(now time.Time) bool {
	var victim net.Conn
	var since time.Time
	for c, in := range l.open {
		if !in.idleSince.IsZero() && !in.idleSince.After(now) && (victim == nil || in.idleSince.Before(since)) {
			victim, since = c, in.idleSince
		}
	}
	if victim == nil {
		return false
	}
	victim.Close()
	delete(l.open, victim)
	return true
}

// connState follows the server's connections (http.Server.ConnState).
func (l *capListener) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.open[c]
	switch {
	case st == http.StateClosed || st == http.StateHijacked:
		delete(l.open, c)
	case in == nil:
	case st == http.StateIdle:
		in.idleSince = time.Now()
	case st == http.StateActive:
		in.idleSince = time.Time{}
	}
}
