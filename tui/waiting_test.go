package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
)

// `vramscope --socket PATH` with nothing set on the
// training side left training silent, and the waiting screen never said
// VRAMSCOPE_SOCKET. It names the exact line, at every size.
func TestGoldenWaitingCustomSocket(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {120, 40}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := New(WithSocket("/home/ana/socks/my.sock"), WithTrainingDefault("/run/user/1000/vramscope/vramscope.sock"), WithClock(time.Now))
			m, _ = update(t, m, tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			v := m.View()
			if !strings.Contains(v, "export VRAMSCOPE_SOCKET=/home/ana/socks/my.sock") {
				t.Errorf("the waiting screen does not name the training side's line:\n%s", v)
			}
			golden.RequireEqual(t, []byte(v))
		})
	}
}

// The default socket on both sides needs no such line.
func TestWaitingDefaultSocketSaysNoMore(t *testing.T) {
	sock := "/run/user/1000/vramscope/vramscope.sock"
	m := New(WithSocket(sock), WithTrainingDefault(sock), WithClock(time.Now))
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	if v := m.View(); strings.Contains(v, "VRAMSCOPE_SOCKET") {
		t.Errorf("the default socket needs no VRAMSCOPE_SOCKET line:\n%s", v)
	}
}
