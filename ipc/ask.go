package ipc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
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

// Answer is the monitor's one-line answer to an ask line.
type Answer struct {
	OK   bool   `json:"ok"`
	Text string `json:"text"`
}

// answerAsk hands an ask line's pid to the handler and writes the answer.
func (s *Server) answerAsk(cn *conn, m *Message) {
	a := Answer{OK: true, Text: fmt.Sprintf("asked the hook of pid %d for a census: it answers at the end of its next step, in the monitor's view and recording", m.PID)}
	if err := s.onAsk(m.PID); err != nil {
		a = Answer{Text: err.Error()}
	}
	line, _ := json.Marshal(a)
	_ = cn.c.SetWriteDeadline(time.Now().Add(AskTimeout))
	_, _ = cn.c.Write(append(line, '\n'))
}

// AskMonitor asks the monitor listening on path to ask the hook of
// process pid for a census (vramscope census). It refuses a listener of
// another user, and gives up after timeout.
func AskMonitor(path string, pid int, timeout time.Duration) (Answer, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return Answer{}, fmt.Errorf("reach the monitor on %s: %w", path, err)
	}
	defer c.Close()
	if uc, ok := c.(*net.UnixConn); ok {
		if uid, known := peerUID(uc); known && uid != os.Geteuid() {
			return Answer{}, fmt.Errorf("the listener on %s is uid %d, not this user's", path, uid)
		}
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := json.Marshal(Message{V: Version, Type: TypeAsk, PID: pid})
	if err != nil {
		return Answer{}, err
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return Answer{}, fmt.Errorf("ask the monitor on %s: %w", path, err)
	}
	reply, err := bufio.NewReaderSize(c, MaxRequestBytes).ReadString('\n')
	if err != nil {
		return Answer{}, fmt.Errorf("no answer from the monitor on %s (an older monitor, or not a live one): %w", path, err)
	}
	var a Answer
	if err := json.Unmarshal([]byte(reply), &a); err != nil {
		return Answer{}, errors.New("the monitor's answer is not JSON")
	}
	return a, nil
}
