package tui

import (
	"fmt"
	"os"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

func TestDump(t *testing.T) {
	if os.Getenv("DUMP") == "" {
		t.Skip()
	}
	lipgloss.SetColorProfile(termenv.Ascii)
	evs := demoEvents(t, "warmup", 40, 1)
	for _, sz := range [][2]int{{80, 24}, {160, 48}} {
		m := live(t, evs, sz[0], sz[1])
		fmt.Println(m.View())
		fmt.Println("-----")
	}
}
