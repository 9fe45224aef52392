package ipc

import "strconv"

// fastDecode parses the common shape of the hot messages (phase, mark,
// sample: flat keys, plain ASCII strings, a mem object) into m, which must
// be zero, without reflection. It returns false, leaving m in any state,
// on anything outside that shape (unknown or differently cased keys,
// escapes, non-ASCII, fractions in integers, ...); the caller then uses
// encoding/json, which alone decides what is an error. Where it returns
// true the result equals json.Unmarshal's (FuzzDecode checks this).
func fastDecode(b []byte, m *Message) bool {
	p := fastParser{b: b}
	if !p.object(func(key []byte) bool { return p.messageField(key, m) }) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object parses {"key": value, ...}, calling field for each key with the
// parser positioned before the value.
func (p *fastParser) object(field func(key []byte) bool) bool {
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

// str parses a string of printable ASCII without escapes.
func (p *fastParser) str() ([]byte, bool) {
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
func (p *fastParser) number(integer bool) ([]byte, bool) {
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

func (p *fastParser) int64(dst *int64) bool {
	lit, ok := p.number(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	*dst = v
	return err == nil
}

func (p *fastParser) int(dst *int) bool {
	var v int64
	if !p.int64(&v) || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

func (p *fastParser) uint64(dst *uint64) bool {
	lit, ok := p.number(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(lit), 10, 64)
	*dst = v
	return err == nil
}

func (p *fastParser) float(dst *float64) bool {
	lit, ok := p.number(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	*dst = v
	return err == nil
}

func (p *fastParser) string(dst *string) bool {
	s, ok := p.str()
	if ok {
		*dst = string(s)
	}
	return ok
}

func (p *fastParser) literal(lit string) bool {
	if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

func (p *fastParser) bool(dst *bool) bool {
	switch {
	case p.literal("true"):
		*dst = true
	case p.literal("false"):
		*dst = false
	default:
		return false
	}
	return true
}

func (p *fastParser) messageField(key []byte, m *Message) bool {
	switch string(key) {
	case "v":
		return p.int(&m.V)
	case "type":
		return p.string(&m.Type)
	case "seq":
		return p.uint64(&m.Seq)
	case "t":
		return p.float(&m.T)
	case "name":
		return p.string(&m.Name)
	case "step":
		return p.int(&m.Step)
	case "micro":
		return p.int(&m.Micro)
	case "edge":
		return p.string(&m.Edge)
	case "user":
		return p.bool(&m.User)
	case "mem":
		if p.literal("null") {
			m.Mem = nil
			return true
		}
		if m.Mem == nil { // encoding/json fills an existing pointer again
			m.Mem = new(Mem)
		}
		mem := m.Mem
		return p.object(func(key []byte) bool { return p.memField(key, mem) })
	}
	return false
}

func (p *fastParser) memField(key []byte, mem *Mem) bool {
	switch string(key) {
	case "allocated":
		return p.int64(&mem.Allocated)
	case "max_allocated":
		return p.int64(&mem.MaxAllocated)
	case "reserved":
		return p.int64(&mem.Reserved)
	case "max_reserved":
		return p.int64(&mem.MaxReserved)
	case "alloc_retries":
		return p.int64(&mem.AllocRetries)
	case "ooms":
		return p.int64(&mem.OOMs)
	}
	return false
}
