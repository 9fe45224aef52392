package record

import (
	"bytes"
	"strconv"
	"time"

	"github.com/vramscope/vramscope/internal/jsonscan"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// fastParseEvent decodes the common shapes of an event line (the keys the
// writer writes, each once, plain ASCII strings without escapes) without
// reflection: the msg object is handed as it stands to ipc.Decode, whose
// own fast path takes the hot message types. It returns false on anything
// else, and on any error, leaving the caller to parseEvent's encoding/json
// path, which alone decides what is an error. Where it returns true the
// result equals that path's (FuzzParseEvent checks this).
func fastParseEvent(line []byte) (session.Event, bool) { return fastParseEventWith(line, ipc.Decode) }

// fastParseEventWith is fastParseEvent with dec decoding the hook message.
func fastParseEventWith(line []byte, dec func([]byte) (*ipc.Message, error)) (session.Event, bool) {
	p := scanner{jsonscan.Scanner{B: line}}
	var (
		e            session.Event
		msg          []byte
		gpu          gpuJSON
		note         session.Note
		gpuAt        []byte
		gpuProcesses []probe.Process
	)
	tLit, seen, ok := p.eventLine(&e.Conn, func(k int) bool {
		switch k {
		case keyMsg:
			// The writer writes msg last: its object ends before the
			// line's closing brace. That much is taken on trust without a
			// scan of its own; dec then reads it as one object or fails,
			// and a failure goes to the full parse.
			if end := bytes.LastIndexByte(p.B, '}'); end > p.I && p.Peek('{') {
				msg, p.I = p.B[p.I:end], end
				return true
			}
			var ok bool
			msg, ok = p.ObjectBytes()
			return ok
		case keyGPU:
			return p.gpu(&gpu, &gpuAt, &gpuProcesses)
		default:
			return p.Object(func(key []byte) bool { return p.noteField(key, &note) })
		}
	}, nil)
	if !ok {
		return session.Event{}, false
	}
	at, err := parseTime(tLit)
	if err != nil {
		return session.Event{}, false
	}
	e.At = at
	switch {
	case seen[keyMsg]:
		if e.Msg, err = dec(msg); err != nil {
			return session.Event{}, false
		}
	case seen[keyGPU]:
		s := &probe.Sample{
			At: at, Device: gpu.Device, Used: gpu.Used, Reserved: gpu.Reserved, Free: gpu.Free,
			Total: gpu.Total, Util: gpu.Util, Took: time.Duration(gpu.TookNS), Processes: gpuProcesses,
		}
		if gpuAt != nil {
			if s.At, err = parseTime(gpuAt); err != nil {
				return session.Event{}, false
			}
		}
		e.GPU = s
	default:
		n := note // a copy: note itself stays on the stack for message lines
		e.Note = &n
	}
	return e, true
}

// The keys of an event line, as indexes into eventLine's seen.
const (
	keyT = iota
	keyConn
	keyMsg
	keyGPU
	keyNote
	lineKeys
)

// lineKey is the index of an event line's key in eventLine's seen, -1
// for a key it does not take.
func lineKey(key []byte) int {
	switch string(key) {
	case "t":
		return keyT
	case "conn":
		return keyConn
	case "msg":
		return keyMsg
	case "gpu":
		return keyGPU
	case "note":
		return keyNote
	}
	return -1
}

// eventLine reads an event line's one object, the key loop that
// fastParseEvent and lightEvent share: the t literal into tLit, conn into
// conn, and the value of each kind (keyMsg, keyGPU, keyNote) through
// kind. unknown decides a key lineKey does not take; nil rejects the
// line. ok is false unless the line is that one object alone, each key at
// most once, with t and exactly one kind; seen says which keys it held.
func (p *scanner) eventLine(conn *uint64, kind func(k int) bool, unknown func(key []byte) bool) (tLit []byte, seen [lineKeys]bool, ok bool) {
	kinds := 0
	ok = p.Object(func(key []byte) bool {
		k := lineKey(key)
		if k < 0 {
			return unknown != nil && unknown(key)
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		switch k {
		case keyT:
			var ok bool
			tLit, ok = p.Number(false)
			return ok
		case keyConn:
			return p.Uint64(conn)
		}
		kinds++
		return kind(k)
	})
	p.Space()
	return tLit, seen, ok && p.I == len(p.B) && tLit != nil && kinds == 1
}

// gpu parses a gpu object; processes is left nil when absent and non-nil
// (possibly empty) when present, as encoding/json leaves gpuJSON.
func (p *scanner) gpu(g *gpuJSON, at *[]byte, processes *[]probe.Process) bool {
	var seen [9]bool
	return p.Object(func(key []byte) bool {
		keys := [...]string{"at", "device", "used", "reserved", "free", "total", "util", "processes", "took_ns"}
		k := -1
		for i, name := range keys {
			if string(key) == name {
				k = i
			}
		}
		if k < 0 || seen[k] {
			return false
		}
		seen[k] = true
		switch k {
		case 0:
			var ok bool
			*at, ok = p.Number(false)
			return ok
		case 1:
			return p.String(&g.Device)
		case 2:
			return p.Int64(&g.Used)
		case 3:
			return p.Int64(&g.Reserved)
		case 4:
			return p.Int64(&g.Free)
		case 5:
			return p.Int64(&g.Total)
		case 6:
			return p.Int(&g.Util)
		case 7:
			*processes = []probe.Process{}
			return p.Array(func() bool {
				var pr probe.Process
				var seen [2]bool
				ok := p.Object(func(key []byte) bool {
					switch {
					case string(key) == "pid" && !seen[0]:
						seen[0] = true
						return p.Int(&pr.PID)
					case string(key) == "used" && !seen[1]:
						seen[1] = true
						return p.Int64(&pr.Used)
					}
					return false
				})
				*processes = append(*processes, pr)
				return ok
			})
		default:
			return p.Int64(&g.TookNS)
		}
	})
}

func (p *scanner) noteField(key []byte, n *session.Note) bool {
	switch string(key) {
	case "kind":
		var s string
		ok := p.String(&s)
		n.Kind = session.NoteKind(s)
		return ok
	case "text":
		return p.String(&n.Text)
	case "seq":
		return p.Uint64(&n.Seq)
	}
	return false
}

// scanner reads the strict subset of JSON that fastParseEvent takes.
type scanner struct{ jsonscan.Scanner }

// lightEvent reads of an event line only what Pacer uses, into an event
// whose Msg or GPU (when the line is one) points to msg or gpu. It returns
// false for a line it cannot read so, which the caller decodes in full:
// anything but one object with the keys spelled as written (encoding/json
// would match "T" or "Conn" too), a hook message with a clock, which
// changes the pacing of what follows, or a kind whose value is not an
// object. Where it returns true the times equal a full decode's when the
// line is an event at all; whether it is, it does not check.
func lightEvent(line []byte, msg *ipc.Message, gpu *probe.Sample) (session.Event, bool) {
	p := scanner{jsonscan.Scanner{B: line}}
	var (
		ev    session.Event
		gpuAt []byte
		msgT  float64
	)
	tLit, seen, ok := p.eventLine(&ev.Conn, func(k int) bool {
		switch k {
		case keyMsg:
			return p.lightMsg(&msgT)
		case keyGPU:
			return p.lightGPU(&gpuAt)
		default:
			return p.Peek('{') && p.SkipValue()
		}
	}, func(key []byte) bool {
		return len(key) > 4 || !foldsTo(key, "t", "conn", "msg", "gpu", "note") && p.SkipValue()
	})
	if !ok {
		return session.Event{}, false
	}
	at, err := lightTime(tLit)
	if err != nil {
		return session.Event{}, false
	}
	ev.At = at
	switch {
	case seen[keyMsg]:
		*msg = ipc.Message{T: msgT}
		ev.Msg = msg
	case seen[keyGPU]:
		*gpu = probe.Sample{At: at}
		if gpuAt != nil {
			if gpu.At, err = lightTime(gpuAt); err != nil {
				return session.Event{}, false
			}
		}
		ev.GPU = gpu
	}
	return ev, true
}

// lightMsg reads a hook message's t (0 when absent, as a decode leaves
// it); false for one with a clock.
func (p *scanner) lightMsg(t *float64) bool {
	if !p.Peek('{') {
		return false
	}
	seenT := false
	return p.Object(func(key []byte) bool {
		switch {
		case string(key) == "t" && !seenT:
			seenT = true
			lit, ok := p.Number(false)
			if !ok {
				return false
			}
			v, err := strconv.ParseFloat(string(lit), 64)
			*t = v
			return err == nil
		case (len(key) == 1 || len(key) == 5) && foldsTo(key, "t", "clock"):
			return false
		}
		return p.SkipValue()
	})
}

// lightGPU reads a gpu sample's at, left nil when absent.
func (p *scanner) lightGPU(at *[]byte) bool {
	if !p.Peek('{') {
		return false
	}
	return p.Object(func(key []byte) bool {
		switch {
		case string(key) == "at" && *at == nil:
			var ok bool
			*at, ok = p.Number(false)
			return ok
		case foldsTo(key, "at"):
			return false
		}
		return p.SkipValue()
	})
}

// foldsTo reports whether key matches one of names as encoding/json
// matches a key to a field (keys here are plain ASCII).
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// lightTime is parseTime without its allocation for the literal as the
// writer writes it (unix seconds, at most nine decimals); other literals
// go to parseTime.
func lightTime(lit []byte) (time.Time, error) {
	var sec, ns int64
	i := 0
	for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
		sec = sec*10 + int64(lit[i]-'0')
	}
	if i == 0 || i > 18 {
		return parseTime(lit)
	}
	if i < len(lit) {
		if lit[i] != '.' || len(lit)-i-1 > 9 {
			return parseTime(lit)
		}
		scale := int64(1e9)
		for i++; i < len(lit); i++ {
			c := lit[i]
			if c < '0' || c > '9' {
				return parseTime(lit)
			}
			scale /= 10
			ns += int64(c-'0') * scale
		}
	}
	at := time.Unix(sec, ns)
	return at, checkTime(at)
}
