package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTmuxReadmeScreenshotIsTheDemo runs `vramscope demo` at 120×36 as a
// new user does and compares its screen after about 10 s with the README's
// screenshot (tui's TestGoldenReadme120x36): the header, the process line,
// the banner, the table's head, a plain step's row, the legend and the
// footer are the same text. The chart and the newest rows move with the
// clock, so they are left out.
func TestTmuxReadmeScreenshotIsTheDemo(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```text\n(.*?)\n```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no screenshot")
	}
	shot := strings.Split(string(m[1]), "\n")
	tm := newTmux(t)
	bin := binary(t)
	tm.run("new-session", "-d", "-s", "main", "-x", "120", "-y", "36", "sh", "-c", "cd '"+t.TempDir()+"' && '"+bin+"' demo; sleep 30")
	scr := tm.waitFor(30*time.Second, "⏱ 0:10", "steady since step 2")
	live := strings.Split(strings.TrimRight(scr, "\n"), "\n")
	trim := func(s string) string { return strings.TrimRight(s, " ") }
	// A plain step's row without its step number and its duration (the
	// demo's steps run on the wall clock: 400 or 401 ms on a loaded
	// machine), and the lines that do not move with the clock.
	row := regexp.MustCompile(`^\s*\d+ `)
	took := regexp.MustCompile(`\s+[\d.]+m?s$`)
	var want, got []string
	pick := func(lines []string, dst *[]string) {
		for i, l := range lines {
			l = trim(l)
			left, _, _ := strings.Cut(l, "│")
			switch {
			case i < 4, strings.HasPrefix(l, "step  "), strings.HasPrefix(l, "▲ session peak"), strings.HasPrefix(l, "q quit"):
				*dst = append(*dst, l)
			case strings.Contains(left, `"`) && row.MatchString(left):
				*dst = append(*dst, "ROW"+took.ReplaceAllString(trim(row.ReplaceAllString(left, "")), ""))
			}
		}
	}
	pick(shot, &want)
	pick(live, &got)
	dedup := func(v []string) string {
		var out []string
		for _, l := range v {
			if len(out) == 0 || out[len(out)-1] != l {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if w, g := dedup(want), dedup(got); w != g {
		t.Errorf("the demo's screen differs from the README's screenshot:\nREADME:\n%s\n\ndemo:\n%s\n\nfull screen:\n%s", w, g, scr)
	}
}
