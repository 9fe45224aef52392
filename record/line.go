package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// gpuJSON is probe.Sample as a recording stores it.
type gpuJSON struct {
	// At is the sample's own time, only when it differs from the line's t.
	At       json.RawMessage `json:"at,omitempty"`
	Device   string          `json:"device"`
	Used     int64           `json:"used"`
	Reserved int64           `json:"reserved"`
	Free     int64           `json:"free"`
	Total    int64           `json:"total"`
	Util     int             `json:"util"`
	// Processes is absent when the list was not read, [] when it was empty.
	Processes *[]processJSON `json:"processes,omitempty"`
	TookNS    int64          `json:"took_ns"`
}

type processJSON struct {
	PID  int   `json:"pid"`
	Used int64 `json:"used"`
}

// appendTime writes t as unix seconds with exactly six decimals.
func appendTime(dst []byte, t time.Time) []byte {
	us := t.Round(time.Microsecond).UnixMicro()
	if us < 0 {
		dst = append(dst, '-')
		us = -us
	}
	dst = strconv.AppendInt(dst, us/1e6, 10)
	frac := us % 1e6
	dst = append(dst, '.')
	for d := int64(1e5); d > 0; d /= 10 {
		dst = append(dst, byte('0'+frac/d%10))
	}
	return dst
}

// parseTime reads unix seconds written as a JSON number, exactly to the
// nanosecond when written in plain decimal (as appendTime does), else
// through float64 rounded to the microsecond.
func parseTime(raw []byte) (time.Time, error) {
	at, err := parseTimeAny(raw)
	if err != nil {
		return at, err
	}
	return at, checkTime(at)
}

// maxEventTime bounds an event's t as the protocol bounds clock.wall: 4e9 s
// after 1970 is the year 2096. Within [0, maxEventTime] any two times are
// a time.Duration apart and every one has a year JSON can write; a t of
// -1e300 made report --json fail and the text report print the year
// -290308.
const maxEventTime = 4e9

// checkTime refuses an event time outside [1970, 2096].
func checkTime(at time.Time) error {
	if s := at.Unix(); s < 0 || s > maxEventTime {
		return fmt.Errorf("field t: %d s is outside 1970 to 2096 (0 to %g)", s, float64(maxEventTime))
	}
	return nil
}

func parseTimeAny(raw []byte) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if at, ok := decimalTime(raw); ok {
		return at, nil
	}
	s := string(raw)
	neg := len(s) > 0 && s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	whole, frac, _ := cutByte(digits, '.')
	if whole != "" && len(frac) <= 9 && allDigits(whole) && allDigits(frac) {
		sec, err := strconv.ParseInt(whole, 10, 64)
		if err == nil {
			ns := int64(0)
			if frac != "" {
				ns, _ = strconv.ParseInt((frac + "000000000")[:9], 10, 64)
			}
			if neg {
				sec, ns = -sec, -ns
			}
			return time.Unix(sec, ns), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is not a number", clip(s))
	}
	if !(f >= 0 && f <= maxEventTime) { // before the conversion overflows
		return time.Time{}, fmt.Errorf("field t: %s s is outside 1970 to 2096 (0 to %g)", clip(s), float64(maxEventTime))
	}
	return time.UnixMicro(int64(f*1e6 + copysign(0.5, f))), nil
}

func copysign(half, f float64) float64 {
	if f < 0 {
		return -half
	}
	return half
}

func cutByte(s string, c byte) (string, string, bool) {
	if i := bytes.IndexByte([]byte(s), c); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// appendEvent encodes one event line, newline included.
func appendEvent(dst []byte, e session.Event) ([]byte, error) {
	n := 0
	for _, set := range []bool{e.Msg != nil, e.GPU != nil, e.Note != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return dst, fmt.Errorf("event must carry exactly one of Msg, GPU and Note (has %d)", n)
	}
	start := len(dst)
	dst = append(dst, `{"t":`...)
	dst = appendTime(dst, e.At)
	if e.Conn != 0 {
		dst = append(dst, `,"conn":`...)
		dst = strconv.AppendUint(dst, e.Conn, 10)
	}
	var err error
	switch {
	case e.Msg != nil:
		dst = append(dst, `,"msg":`...)
		dst, err = appendMsg(dst, e.Msg)
	case e.GPU != nil:
		dst = append(dst, `,"gpu":`...)
		dst, err = appendGPU(dst, e.GPU, e.At)
	default:
		dst = append(dst, `,"note":`...)
		var b []byte
		b, err = json.Marshal(e.Note)
		dst = append(dst, b...)
	}
	if err != nil {
		return dst[:start], err
	}
	return append(dst, '}', '\n'), nil
}

// appendMsg writes the hook message as received (Raw) when there is one.
func appendMsg(dst []byte, m *ipc.Message) ([]byte, error) {
	if len(m.Raw) == 0 {
		b, err := json.Marshal(m)
		if err != nil {
			return dst, fmt.Errorf("encode hook message: %w", err)
		}
		return append(dst, b...), nil
	}
	if bytes.IndexByte(m.Raw, '\n') < 0 {
		return append(dst, m.Raw...), nil
	}
	var b bytes.Buffer // a newline would split the line: compact it away
	if err := json.Compact(&b, m.Raw); err != nil {
		return dst, fmt.Errorf("hook message Raw is not JSON: %w", err)
	}
	return append(dst, b.Bytes()...), nil
}

func appendGPU(dst []byte, s *probe.Sample, at time.Time) ([]byte, error) {
	g := gpuJSON{
		Device: s.Device, Used: s.Used, Reserved: s.Reserved, Free: s.Free,
		Total: s.Total, Util: s.Util, TookNS: int64(s.Took),
	}
	if !s.At.Round(time.Microsecond).Equal(at.Round(time.Microsecond)) {
		g.At = appendTime(nil, s.At)
	}
	if s.Processes != nil {
		ps := make([]processJSON, len(s.Processes))
		for i, p := range s.Processes {
			ps[i] = processJSON{PID: p.PID, Used: p.Used}
		}
		g.Processes = &ps
	}
	b, err := json.Marshal(g)
	if err != nil {
		return dst, fmt.Errorf("encode gpu sample: %w", err)
	}
	return append(dst, b...), nil
}

// lineJSON is one event line as read.
type lineJSON struct {
	T    json.RawMessage `json:"t"`
	Conn uint64          `json:"conn"`
	Msg  json.RawMessage `json:"msg"`
	GPU  *gpuJSON        `json:"gpu"`
	Note *session.Note   `json:"note"`
}

// errUnknownKind marks a line with no event kind this build knows: written
// by a newer minor version, skipped.
var errUnknownKind = errors.New("no msg, gpu or note (a newer kind of event?)")

// parseEvent decodes one event line. Hook messages go through ipc.Decode,
// the same validation as live.
func parseEvent(line []byte) (session.Event, error) { return parseEventWith(line, ipc.Decode) }

// parseEventBare is parseEvent for a reader that will not record the
// events again: the messages keep no copy of their line (Raw).
func parseEventBare(line []byte) (session.Event, error) { return parseEventWith(line, ipc.DecodeBare) }

func parseEventWith(line []byte, dec func([]byte) (*ipc.Message, error)) (session.Event, error) {
	if e, ok := fastParseEventWith(line, dec); ok {
		return e, nil
	}
	return parseEventJSONWith(line, dec)
}

// parseEventJSON is parseEvent through encoding/json, for every shape.
func parseEventJSON(line []byte) (session.Event, error) { return parseEventJSONWith(line, ipc.Decode) }

func parseEventJSONWith(line []byte, dec func([]byte) (*ipc.Message, error)) (session.Event, error) {
	var l lineJSON
	if err := json.Unmarshal(line, &l); err != nil {
		return session.Event{}, fmt.Errorf("not JSON: %s", oneLine(err))
	}
	if l.T == nil {
		return session.Event{}, errors.New("field t: missing")
	}
	at, err := parseTime(l.T)
	if err != nil {
		return session.Event{}, fmt.Errorf("field t: %w", err)
	}
	e := session.Event{At: at, Conn: l.Conn}
	hasMsg := len(l.Msg) > 0 && string(l.Msg) != "null"
	n := 0
	for _, set := range []bool{hasMsg, l.GPU != nil, l.Note != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return session.Event{}, errUnknownKind
	case n > 1:
		return session.Event{}, errors.New("more than one of msg, gpu and note")
	case hasMsg:
		if e.Msg, err = dec(l.Msg); err != nil {
			return session.Event{}, fmt.Errorf("hook message: %w", err)
		}
	case l.GPU != nil:
		if e.GPU, err = l.GPU.sample(at); err != nil {
			return session.Event{}, err
		}
	default:
		e.Note = l.Note
	}
	return e, nil
}

func (g *gpuJSON) sample(at time.Time) (*probe.Sample, error) {
	s := &probe.Sample{
		At: at, Device: g.Device, Used: g.Used, Reserved: g.Reserved, Free: g.Free,
		Total: g.Total, Util: g.Util, Took: time.Duration(g.TookNS),
	}
	if g.At != nil {
		t, err := parseTime(g.At)
		if err != nil {
			return nil, fmt.Errorf("field gpu.at: %w", err)
		}
		s.At = t
	}
	if g.Processes != nil {
		s.Processes = make([]probe.Process, len(*g.Processes))
		for i, p := range *g.Processes {
			s.Processes[i] = probe.Process{PID: p.PID, Used: p.Used}
		}
	}
	return s, nil
}

func oneLine(err error) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte(" ")))
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// decimalTime reads the shape the writer writes, [-]digits[.digits] with
// at most 18 whole and 9 fraction digits, as parseTimeAny's exact path
// does, without allocating; ok is false for any other shape.
func decimalTime(b []byte) (at time.Time, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	whole, frac, _ := bytes.Cut(b, []byte{'.'})
	if len(whole) == 0 || len(whole) > 18 || len(frac) > 9 {
		return time.Time{}, false
	}
	var sec, ns int64
	for _, c := range whole {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		sec = sec*10 + int64(c-'0')
	}
	for i := range 9 {
		ns *= 10
		if i < len(frac) {
			c := frac[i]
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
			ns += int64(c - '0')
		}
	}
	if neg {
		sec, ns = -sec, -ns
	}
	return time.Unix(sec, ns), true
}
