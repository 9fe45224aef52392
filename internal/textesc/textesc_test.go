package textesc

import (
	"fmt"
	"testing"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain host-01", "plain host-01"},
		{"ünïcødé → ✓ 日本", "ünïcødé → ✓ 日本"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},                // OSC 0: window title
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},                      // clear screen, home
		{"\x1b]52;c;ZXZpbA==\x1b\\", `\x1b]52;c;ZXZpbA==\x1b\`}, // OSC 52: clipboard
		{"a\rb\bc\td\ne\x00\x7f", `a\rb\x08c\td\ne\x00\x7f`},
		{"\u009b31m", `\u009b31m`},   // C1 CSI as a rune
		{"\u0085next", `\u0085next`}, // C1 NEL
		{"bad\x9b[2J", `bad\x9b[2J`}, // a lone C1 byte, not UTF-8
		{"\xff\xfe", `\xff\xfe`},
		{"", ""},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		if Safe(c.in) != (c.in == c.want) {
			t.Errorf("Safe(%q) = %v", c.in, Safe(c.in))
		}
		if !Safe(String(c.in)) {
			t.Errorf("String(%q) is not safe", c.in)
		}
	}
	if got := Strings([]string{"train.py", "--x=\x1b[31m"}, " "); got != `train.py --x=\x1b[31m` {
		t.Errorf("Strings = %q", got)
	}
}

func TestPlainStringIsNotCopied(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = String("forward") }); n != 0 {
		t.Errorf("%v allocations for a plain string", n)
	}
}

// TestBidiControlsAreEscaped: bidi embeddings, overrides and isolates
// (U+202A–202E, U+2066–2069, and the marks U+200E, U+200F, U+061C) reorder
// what follows them on screen, so a name can show text it does not hold
// ("Trojan Source"); U+2028 and U+2029 break lines. They reached the TUI,
// report, CSV and Perfetto raw.
func TestBidiControlsAreEscaped(t *testing.T) {
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c, 0x2028, 0x2029} {
		s := "a" + string(r) + "b"
		want := fmt.Sprintf(`a\u%04xb`, r)
		if got := String(s); got != want {
			t.Errorf("String(%q) = %q, want %q", s, got, want)
		}
		if Safe(s) {
			t.Errorf("Safe(%q) = true", s)
		}
	}
	if got := String("naïve Ω ✓ 日本"); got != "naïve Ω ✓ 日本" {
		t.Errorf("other scripts changed: %q", got)
	}
}
