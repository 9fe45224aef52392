package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/session"
)

// While a forward runs (or the measurement is stale) the activations are
// withheld; the panel gives their sum with the temporaries, as the text
// report does, and no such row otherwise. The panel keeps its height: the
// row takes the blank line under the layers (the demo's screen, compared
// with the README's at whatever phase it is in, must not move).
func TestAnatomyPanelGivesActivationsAndTemporariesWhenWithheld(t *testing.T) {
	layers := func(stale bool) diagnose.Layers {
		l := diagnose.Layers{Step: 3, Phase: "forward", Allocated: 900 * session.MiB, Reserved: 1000 * session.MiB,
			Weights: 100 * session.MiB, Gradients: 0, Optimizer: 200 * session.MiB, Activations: 400 * session.MiB,
			Other: 200 * session.MiB, Cache: 100 * session.MiB, NonPyTorch: session.Unknown, OtherProcesses: session.Unknown,
			ProcessUsed: session.Unknown, DeviceUsed: session.Unknown, Transient: 600 * session.MiB}
		if stale {
			l.Activations, l.Other, l.ActivationsStale = session.Unknown, session.Unknown, true
		}
		return l
	}
	at := map[bool]int{}
	for _, stale := range []bool{false, true} {
		v := ansi.Strip(anatomyView(diagnose.Breakdown{Now: layers(stale), Peak: layers(false)}, session.Unknown, 60, 40))
		row := "  activ.+temps           600      600"
		if strings.Contains(v, row) != stale {
			t.Errorf("withheld %v: row %q in\n%s", stale, row, v)
		}
		for i, l := range strings.Split(v, "\n") {
			if strings.HasPrefix(l, "allocated") {
				at[stale] = i
			}
		}
	}
	if at[false] == 0 || at[false] != at[true] {
		t.Errorf("the allocated line at %v: the panel moved", at)
	}
}
