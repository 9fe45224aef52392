// Package jsonscan reads the strict subset of JSON that vramscope's own
// writers produce (flat objects, plain ASCII strings, integers and floats)
// without reflection. It serves the fast paths of the protocol decoder and
// of the recording reader, whose callers fall back to encoding/json on
// anything it does not take. Standard library only.
package jsonscan

import "strconv"

// Scanner reads B from I.
type Scanner struct {
	B []byte // the input
	I int    // the position of the next byte to read
}

// Space skips white space.
func (p *Scanner) Space() {
	for p.I < len(p.B) {
		switch p.B[p.I] {
		case ' ', '\t', '\n', '\r':
			p.I++
		default:
			return
		}
	}
}

// Consume skips white space and then c, reporting whether c was there.
func (p *Scanner) Consume(c byte) bool {
	p.Space()
	if p.I < len(p.B) && p.B[p.I] == c {
		p.I++
		return true
	}
	return false
}

// Object parses {"key": value, ...}, calling field for each key with the
// parser positioned before the value.
func (p *Scanner) Object(field func(key []byte) bool) bool {
	if !p.Consume('{') {
		return false
	}
	if p.Consume('}') {
		return true
	}
	for {
		p.Space()
		key, ok := p.Str()
		if !ok || !p.Consume(':') {
			return false
		}
		p.Space()
		if !field(key) {
			return false
		}
		if p.Consume(',') {
			continue
		}
		return p.Consume('}')
	}
}

// Str parses a string of printable ASCII without escapes.
func (p *Scanner) Str() ([]byte, bool) {
	if p.I >= len(p.B) || p.B[p.I] != '"' {
		return nil, false
	}
	start := p.I + 1
	for j := start; j < len(p.B); j++ {
		c := p.B[j]
		if c == '"' {
			p.I = j + 1
			return p.B[start:j], true
		}
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// Number returns the literal of a JSON number, checking its grammar.
func (p *Scanner) Number(integer bool) ([]byte, bool) {
	b, start, j := p.B, p.I, p.I
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
	p.I = j
	return b[start:j], true
}

// Int64 reads an integer into dst.
func (p *Scanner) Int64(dst *int64) bool {
	lit, ok := p.Number(true)
	if !ok {
		return false
	}
	if v, ok := smallInt(lit); ok {
		*dst = v
		return true
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	*dst = v
	return err == nil
}

// smallInt is the value of an integer literal Number has checked, when it
// has at most 18 digits and so cannot overflow; ok is false otherwise.
func smallInt(lit []byte) (v int64, ok bool) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 18 {
		return 0, false
	}
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	if len(lit) > len(digits) {
		v = -v
	}
	return v, true
}

// Int reads an integer that fits an int into dst.
func (p *Scanner) Int(dst *int) bool {
	var v int64
	if !p.Int64(&v) || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

// Uint64 reads a non-negative integer into dst.
func (p *Scanner) Uint64(dst *uint64) bool {
	lit, ok := p.Number(true)
	if !ok {
		return false
	}
	if v, ok := smallInt(lit); ok && lit[0] != '-' {
		*dst = uint64(v)
		return true
	}
	v, err := strconv.ParseUint(string(lit), 10, 64)
	*dst = v
	return err == nil
}

// Float reads a number into dst.
func (p *Scanner) Float(dst *float64) bool {
	lit, ok := p.Number(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	*dst = v
	return err == nil
}

// String reads a string (see Str) into dst.
func (p *Scanner) String(dst *string) bool {
	s, ok := p.Str()
	if ok {
		*dst = string(s)
	}
	return ok
}

// StringOf reads a string (see Str) into dst, as the element of common it
// equals when there is one: a word a stream repeats on every line (a
// message type, a phase name) then costs no allocation.
func (p *Scanner) StringOf(dst *string, common []string) bool {
	s, ok := p.Str()
	if !ok {
		return false
	}
	for _, c := range common {
		if string(s) == c {
			*dst = c
			return true
		}
	}
	*dst = string(s)
	return true
}

// Literal reads the bytes of lit (true, false, null).
func (p *Scanner) Literal(lit string) bool {
	if len(p.B)-p.I >= len(lit) && string(p.B[p.I:p.I+len(lit)]) == lit {
		p.I += len(lit)
		return true
	}
	return false
}

// Bool reads true or false into dst.
func (p *Scanner) Bool(dst *bool) bool {
	switch {
	case p.Literal("true"):
		*dst = true
	case p.Literal("false"):
		*dst = false
	default:
		return false
	}
	return true
}

// Array parses [value, ...], calling elem with the scanner before each.
func (p *Scanner) Array(elem func() bool) bool {
	if !p.Consume('[') {
		return false
	}
	if p.Consume(']') {
		return true
	}
	for {
		p.Space()
		if !elem() {
			return false
		}
		if p.Consume(',') {
			continue
		}
		return p.Consume(']')
	}
}

// ObjectBytes returns the bytes of an object value, braces included,
// finding its end by nesting and strings only: its content is left to be
// checked by whoever decodes it.
func (p *Scanner) ObjectBytes() ([]byte, bool) {
	if p.I >= len(p.B) || p.B[p.I] != '{' {
		return nil, false
	}
	start, depth := p.I, 0
	for j := start; j < len(p.B); j++ {
		switch p.B[j] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				p.I = j + 1
				return p.B[start:p.I], true
			}
		case '"':
			for j++; j < len(p.B) && p.B[j] != '"'; j++ {
				if p.B[j] == '\\' {
					j++
				}
			}
		}
	}
	return nil, false
}

// Peek reports whether the next byte is c.
func (p *Scanner) Peek(c byte) bool { return p.I < len(p.B) && p.B[p.I] == c }

// SkipValue steps over one value, following only nesting and strings: a
// malformed value is left for the check of the line that sets the end.
func (p *Scanner) SkipValue() bool {
	depth := 0
	for j := p.I; j < len(p.B); j++ {
		switch p.B[j] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of a scalar in an object
				p.I = j
				return true
			}
			depth--
			if depth == 0 {
				p.I = j + 1
				return true
			}
		case ',':
			if depth == 0 {
				p.I = j
				return true
			}
		case '"':
			for j++; j < len(p.B) && p.B[j] != '"'; j++ {
				if p.B[j] == '\\' {
					j++
				}
			}
			if depth == 0 {
				p.I = j + 1
				return j < len(p.B)
			}
		}
	}
	return false
}
