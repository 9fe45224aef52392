package tui

import (
	"github.com/charmbracelet/lipgloss"

	"github.com/vramscope/vramscope/internal/textesc"
)

// Styles. Every state they mark is also told without colour (a marker, a
// word or bold), so the view stays readable under NO_COLOR.
var (
	styleTitle   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	styleDim     = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
	styleBold    = lipgloss.NewStyle().Bold(true)
	styleOK      = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
	styleWarn    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))
	styleBad     = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))
	styleInfo    = lipgloss.NewStyle().Foreground(lipgloss.Color("14"))
	styleRec     = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))
	styleHeading = lipgloss.NewStyle().Bold(true).Underline(true)
	stylePeakRow = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))
	styleWarmRow = lipgloss.NewStyle().Foreground(lipgloss.Color("14"))
	styleBox     = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1)
)

// Series colours of the memory chart.
var (
	colAllocated = lipgloss.Color("10")
	colMaxAlloc  = lipgloss.Color("11")
	colReserved  = lipgloss.Color("12")
	colGPU       = lipgloss.Color("13")
)

// phaseLook is how a phase is drawn in the chart's phase strip.
type phaseLook struct {
	letter rune
	style  lipgloss.Style
}

var phaseLooks = map[string]phaseLook{
	"zero_grad": {'z', lipgloss.NewStyle().Foreground(lipgloss.Color("8"))},
	"forward":   {'f', lipgloss.NewStyle().Foreground(lipgloss.Color("10"))},
	"loss":      {'l', lipgloss.NewStyle().Foreground(lipgloss.Color("14"))},
	"backward":  {'b', lipgloss.NewStyle().Foreground(lipgloss.Color("9"))},
	"step":      {'s', lipgloss.NewStyle().Foreground(lipgloss.Color("12"))},
}

// userLook is the look of phases the user named: their capitalised
// initial in magenta.
func lookOf(name string, user bool) phaseLook {
	if l, ok := phaseLooks[name]; ok && !user {
		return l
	}
	r := 'U'
	if name != "" {
		r = []rune(name)[0]
		if r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		if !textesc.Safe(string(r)) || width(string(r)) != 1 {
			r = 'U' // a control character, or a rune not one cell wide
		}
	}
	return phaseLook{r, lipgloss.NewStyle().Foreground(lipgloss.Color("13"))}
}
