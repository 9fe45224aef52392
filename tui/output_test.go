package tui

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// `vramscope run` sent the script's output to a log that
// nothing on screen named. The header names it from the waiting screen
// on, and o shows its last lines, escaped, following its end.
func TestOutputPageShowsTheLogsLastLines(t *testing.T) {
	log := filepath.Join(t.TempDir(), "vramscope-run-20261125-030000.log")
	var b strings.Builder
	for i := 0; i < 200; i++ {
		b.WriteString("epoch 1 batch " + strconv.Itoa(i) + " loss 0.5\n")
	}
	b.WriteString("progress 10%\rprogress 50%\rprogress 100%\n")
	b.WriteString("colour \x1b[31mred\x1b[0m and a bell\a\n")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m := New(WithOutputLog(log), WithSocket("/tmp/s.sock"), WithClock(time.Now))
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	if v := m.View(); !strings.Contains(v, "output → ") || !strings.Contains(v, filepath.Base(log)[:20]) {
		t.Fatalf("the waiting screen does not say where the output goes:\n%s", v)
	}
	if v := m.View(); !strings.Contains(v, "o out") {
		t.Errorf("the footer lacks o:\n%s", v)
	}
	m, cmd := update(t, m, keyMsg("o"))
	if m.page != pageOutput || cmd == nil {
		t.Fatalf("o opened page %v, cmd %v", m.page, cmd)
	}
	m, next := update(t, m, cmd())
	v := m.View()
	for _, want := range []string{"progress 100%", "colour ^[[31mred^[[0m and a bell^G", "batch 199 loss"} {
		if !strings.Contains(v, want) {
			t.Errorf("the page lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "\x1b[31m") || strings.Contains(v, "progress 10%") {
		t.Errorf("raw escape or overwritten progress shown:\n%q", v)
	}
	if top := press(t, m, "home").View(); !strings.Contains(top, "Command output") || !strings.Contains(top, "the command's output goes to") {
		t.Errorf("home does not show the page's title and the log's path:\n%s", top)
	}
	if next == nil {
		t.Error("the open page does not read the log again")
	}
	m = press(t, m, "o")
	if m.page != pageMain {
		t.Error("o again did not close the page")
	}
}

// End shows a page's last lines even when the page is shorter by the next
// frame (its height follows the banner's, which can grow meanwhile).
func TestPagerEndKeepsTheEnd(t *testing.T) {
	lines := make([]string, 38)
	for i := range lines {
		lines[i] = "line " + strconv.Itoa(i+1)
	}
	p := pager{}.update(keyMsg("end"), newKeyMap(false, false, false), len(lines), 20)
	v := p.view(lines, 40, 17) // three rows fewer than when End was pressed
	if !strings.Contains(v, "line 38") || !strings.Contains(v, "lines 23–38 of 38") {
		t.Errorf("after End the page does not end with line 38:\n%s", v)
	}
}
