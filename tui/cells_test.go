package tui

import (
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestWidthMatchesAnsi checks width's fast path against ansi.StringWidth:
// every rune it counts as one cell, and lines such as the view draws.
func TestWidthMatchesAnsi(t *testing.T) {
	var runes []string
	for r := rune(0x20); r < 0x3000; r++ {
		if oneCell(r) {
			runes = append(runes, string(r))
		}
	}
	lines := append(runes,
		"", "plain ascii", "\x1b[1;38;5;11m▲ 17   \x1b[0m 4096 ≥3100",
		"\x1b[90m  · \x1b[0mgrowth — 12 MiB/step…", "⠁⣿ │ ┊12 ━ alloc 4.4 GiB",
		"⏱ 1:02", "日本", "e\u0301", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "a\tb", "½ ×",
	)
	for _, s := range lines {
		if got, want := width(s), ansi.StringWidth(s); got != want {
			t.Errorf("width(%q) = %d, ansi.StringWidth = %d", s, got, want)
		}
	}
}
