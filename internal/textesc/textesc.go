// Package textesc makes text from a hook or a file safe to show: every
// control character becomes a visible escape, so a hostile host name,
// argv, phase name or note cannot move the cursor, clear the screen, set
// the window title or write the clipboard of whoever reads it.
//
// It escapes the way journalctl and git show what they cannot print: C0
// controls (U+0000–U+001F), DEL and the C1 controls (U+0080–U+009F) become
// \n, \r, \t or \xNN (\u0085 for a C1 rune), and a byte that is not valid
// UTF-8 becomes \xNN, since a terminal in a legacy encoding reads a lone
// 0x9b as CSI. The bidi controls (embeddings and overrides U+202A–202E,
// isolates U+2066–2069, the marks U+200E, U+200F and U+061C) reorder what
// follows them, so a name could show text it does not hold, and U+2028
// and U+2029 break lines: they become \uNNNN. Everything else, other
// scripts and symbols included, is kept. Text meant for JSON data keeps
// its original bytes: the format escapes them.
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
		case r >= 0x80 && r <= 0x9f || bidiOrSeparator(r):
			b.WriteString(`\u`)
			b.WriteByte(hex[r>>12&15])
			b.WriteByte(hex[r>>8&15])
			b.WriteByte(hex[r>>4&15])
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
		if r == utf8.RuneError && size == 1 || r >= 0x80 && r <= 0x9f || bidiOrSeparator(r) {
			return i
		}
		i += size
	}
	return -1
}

// bidiOrSeparator says whether r is a bidi control or a line or paragraph
// separator: a rune that changes how the text around it is shown.
func bidiOrSeparator(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == 0x200e || r == 0x200f || r == 0x061c || r == 0x2028 || r == 0x2029
}
