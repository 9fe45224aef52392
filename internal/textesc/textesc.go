// Package textesc makes text from a hook or a file safe to show: every
// control character becomes a visible escape, so a hostile host name,
// argv, phase name or note cannot move the cursor, clear the screen, set
// the window title or write the clipboard of whoever reads it.
//
// It escapes the way journalctl and git show what they cannot print: C0
// controls (U+0000–U+001F), DEL and the C1 controls (U+0080–U+009F) become
// \n, \r, \t or \xNN (\u0085 for a C1 rune), and a byte that is not valid
// UTF-8 becomes \xNN, since a terminal in a legacy encoding reads a lone
// 0x9b as CSI. Everything else, other scripts and symbols included, is
// kept. Text meant for JSON keeps its original bytes: the format escapes
// them.
package textesc

import (
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String returns s with every control character and invalid byte escaped.
// It returns s itself when there is nothing to escape.
func String(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20 || c == 0x7f:
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		case r >= 0x80 && r <= 0x9f:
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&15])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Strings returns the elements of ss escaped, joined by sep (for argv).
func Strings(ss []string, sep string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = String(s)
	}
	return strings.Join(out, sep)
}

// Safe says whether s holds nothing String would escape.
func Safe(s string) bool { return firstUnsafe(s) < 0 }

// firstUnsafe is the index of the first byte String escapes, -1 if none.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r >= 0x80 && r <= 0x9f {
			return i
		}
		i += size
	}
	return -1
}
