package ipc

import (
	"fmt"
	"time"
)

// AskTimeout bounds the write of one request: the hook takes what its
// monitor wrote every 50 ms without waiting, so a request that does not fit
// in the socket's buffer within this time is dropped, never waited on.
const AskTimeout = 200 * time.Millisecond

// Ask writes request r to connection conn (docs/protocol.md, "Requests").
// The connection must have said hello. It fails, without closing the
// connection, when the write does not finish within AskTimeout.
func (s *Server) Ask(conn uint64, r Request) error {
	line, err := r.Line()
	if err != nil {
		return err
	}
	s.mu.Lock()
	cn := s.conns[conn]
	s.mu.Unlock()
	if cn == nil {
		return fmt.Errorf("ask conn %d: no such connection", conn)
	}
	if !cn.hello.Load() {
		return fmt.Errorf("ask conn %d: no hello yet", conn)
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if err := cn.c.SetWriteDeadline(time.Now().Add(AskTimeout)); err != nil {
		return fmt.Errorf("ask conn %d: %w", conn, err)
	}
	_, err = cn.c.Write(line)
	_ = cn.c.SetWriteDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("ask conn %d: %w", conn, err)
	}
	return nil
}
