package record

import (
	"strconv"
	"time"

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
func fastParseEvent(line []byte) (session.Event, bool) {
	p := scanner{b: line}
	var (
		e            session.Event
		seen         [5]bool // t, conn, msg, gpu, note
		msg          []byte
		gpu          gpuJSON
		note         session.Note
		tLit, gpuAt  []byte
		kinds        int
		gpuProcesses []probe.Process
	)
	ok := p.object(func(key []byte) bool {
		k := lineKey(key)
		if k < 0 || seen[k] {
			return false
		}
		seen[k] = true
		switch k {
		case 0:
			var ok bool
			tLit, ok = p.number(false)
			return ok
		case 1:
			return p.uint64(&e.Conn)
		case 2:
			kinds++
			var ok bool
			msg, ok = p.objectBytes()
			return ok
		case 3:
			kinds++
			return p.gpu(&gpu, &gpuAt, &gpuProcesses)
		default:
			kinds++
			return p.object(func(key []byte) bool { return p.noteField(key, &note) })
		}
	})
	p.space()
	if !ok || p.i != len(p.b) || tLit == nil || kinds != 1 {
		return session.Event{}, false
	}
	at, err := parseTime(tLit)
	if err != nil {
		return session.Event{}, false
	}
	e.At = at
	switch {
	case seen[2]:
		if e.Msg, err = ipc.Decode(msg); err != nil {
			return session.Event{}, false
		}
	case seen[3]:
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
		e.Note = &note
	}
	return e, true
}

// lineKey is the index of an event line's key in fastParseEvent's seen,
// -1 for a key it does not take.
func lineKey(key []byte) int {
	switch string(key) {
	case "t":
		return 0
	case "conn":
		return 1
	case "msg":
		return 2
	case "gpu":
		return 3
	case "note":
		return 4
	}
	return -1
}

// gpu parses a gpu object; processes is left nil when absent and non-nil
// (possibly empty) when present, as encoding/json leaves gpuJSON.
func (p *scanner) gpu(g *gpuJSON, at *[]byte, processes *[]probe.Process) bool {
	var seen [9]bool
	return p.object(func(key []byte) bool {
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
			*at, ok = p.number(false)
			return ok
		case 1:
			return p.string(&g.Device)
		case 2:
			return p.int64(&g.Used)
		case 3:
			return p.int64(&g.Reserved)
		case 4:
			return p.int64(&g.Free)
		case 5:
			return p.int64(&g.Total)
		case 6:
			return p.int(&g.Util)
		case 7:
			*processes = []probe.Process{}
			return p.array(func() bool {
				var pr probe.Process
				var seen [2]bool
				ok := p.object(func(key []byte) bool {
					switch {
					case string(key) == "pid" && !seen[0]:
						seen[0] = true
						return p.int(&pr.PID)
					case string(key) == "used" && !seen[1]:
						seen[1] = true
						return p.int64(&pr.Used)
					}
					return false
				})
				*processes = append(*processes, pr)
				return ok
			})
		default:
			return p.int64(&g.TookNS)
		}
	})
}

func (p *scanner) noteField(key []byte, n *session.Note) bool {
	switch string(key) {
	case "kind":
		var s string
		ok := p.string(&s)
		n.Kind = session.NoteKind(s)
		return ok
	case "text":
		return p.string(&n.Text)
	case "seq":
		return p.uint64(&n.Seq)
	}
	return false
}

// scanner reads the strict subset of JSON that fastParseEvent takes.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object parses {"key": value, ...}, calling field for each key with the
// scanner positioned before the value.
func (p *scanner) object(field func(key []byte) bool) bool {
	if !p.consume('{') {
		return false
	}
	if p.consume('}') {
		return true
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok || !p.consume(':') {
			return false
		}
		p.space()
		if !field(key) {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume('}')
	}
}

// array parses [value, ...], calling elem with the scanner before each.
func (p *scanner) array(elem func() bool) bool {
	if !p.consume('[') {
		return false
	}
	if p.consume(']') {
		return true
	}
	for {
		p.space()
		if !elem() {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume(']')
	}
}

// objectBytes returns the bytes of an object value, braces included,
// finding its end by nesting and strings only: its content is left to be
// checked by whoever decodes it.
func (p *scanner) objectBytes() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return nil, false
	}
	start, depth := p.i, 0
	for j := start; j < len(p.b); j++ {
		switch p.b[j] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				p.i = j + 1
				return p.b[start:p.i], true
			}
		case '"':
			for j++; j < len(p.b) && p.b[j] != '"'; j++ {
				if p.b[j] == '\\' {
					j++
				}
			}
		}
	}
	return nil, false
}

// str parses a string of printable ASCII without escapes.
func (p *scanner) str() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		if c == '"' {
			p.i = j + 1
			return p.b[start:j], true
		}
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// number returns the literal of a JSON number, checking its grammar.
func (p *scanner) number(integer bool) ([]byte, bool) {
	b, start, j := p.b, p.i, p.i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return nil, false
	}
	if !integer {
		if j < len(b) && b[j] == '.' {
			j++
			d := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == d {
				return nil, false
			}
		}
		if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
			j++
			if j < len(b) && (b[j] == '+' || b[j] == '-') {
				j++
			}
			d := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == d {
				return nil, false
			}
		}
	}
	p.i = j
	return b[start:j], true
}

func (p *scanner) int64(dst *int64) bool {
	lit, ok := p.number(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	*dst = v
	return err == nil
}

func (p *scanner) int(dst *int) bool {
	var v int64
	if !p.int64(&v) || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

func (p *scanner) uint64(dst *uint64) bool {
	lit, ok := p.number(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(lit), 10, 64)
	*dst = v
	return err == nil
}

func (p *scanner) string(dst *string) bool {
	s, ok := p.str()
	if ok {
		*dst = string(s)
	}
	return ok
}
