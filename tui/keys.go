package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap is every binding of the TUI; help renders it.
type keyMap struct {
	Quit, Help, Pause, Left, Right, ZoomIn, ZoomOut key.Binding
	Tab, Record, Speed, Up, Down, PgUp, PgDown      key.Binding
	Home, End, Diag, Anatomy, Back, Output          key.Binding
	Census                                          key.Binding
}

func newKeyMap(replay, canRecord, output bool) keyMap {
	k := keyMap{
		Quit:    key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Help:    key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Pause:   key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "pause")),
		Left:    key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←", "earlier")),
		Right:   key.NewBinding(key.WithKeys("right", "l"), key.WithHelp("→", "later")),
		ZoomIn:  key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+", "zoom in")),
		ZoomOut: key.NewBinding(key.WithKeys("-", "_"), key.WithHelp("-", "zoom out")),
		Tab:     key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "process")),
		Record:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "record")),
		Speed:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "speed")),
		Up:      key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑", "older step")),
		Down:    key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓", "newer step")),
		PgUp:    key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "page up")),
		PgDown:  key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "page down")),
		Home:    key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "first step")),
		End:     key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "follow newest")),
		Diag:    key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "diagnosis")),
		Anatomy: key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "anatomy")),
		Back:    key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Output:  key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "command output")),
		Census:  key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "census (live: ask for one)")),
	}
	k.Output.SetEnabled(output)
	if replay {
		k.Census.SetHelp("c", "census")
		k.Pause.SetHelp("space", "pause")
		k.Left.SetHelp("←", "seek back")
		k.Right.SetHelp("→", "seek forward")
		k.Record.SetEnabled(false)
	} else {
		k.Speed.SetEnabled(false)
		k.Record.SetEnabled(canRecord)
	}
	return k
}

// hint is one binding of the footer: its keys, its word and a shorter
// word for a narrow terminal.
type hint struct{ key, desc, terse string }

// footerHints are the footer's bindings, most useful first: a narrow
// footer drops from the end (the help page, ?, lists every key). tab is
// left out with one process, where it does nothing.
func (k keyMap) footerHints(processes int) []hint {
	left := "time"
	if !k.Record.Enabled() && k.Speed.Enabled() {
		left = "seek"
	}
	hs := []hint{{"q", "quit", "quit"}, {"?", "help", "help"}}
	if k.Output.Enabled() {
		hs = append(hs, hint{"o", "output", "out"})
	}
	hs = append(hs, []hint{{"space", "pause", "pause"},
		{"←/→", left, left}, {"+/-", "zoom", "zoom"}}...)
	if k.Record.Enabled() {
		hs = append(hs, hint{"r", "record", "rec"})
	}
	if k.Speed.Enabled() {
		hs = append(hs, hint{"s", "speed", "speed"})
	}
	hs = append(hs, hint{"d", "diagnosis", "diag"}, hint{"a", "anatomy", "anat"})
	if processes > 1 {
		hs = append(hs, hint{"tab", "process", "proc"})
	}
	return append(hs, hint{"↑/↓", "steps", "steps"})
}

// FullHelp is the help overlay, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Quit, k.Help, k.Pause, k.Tab, k.Record, k.Speed},
		{k.Diag, k.Anatomy, k.Census, k.Output, k.Back, k.Left, k.Right, k.ZoomIn, k.ZoomOut},
		{k.Up, k.Down, k.PgUp, k.PgDown, k.Home, k.End},
	}
}

// outputNotice answers o outside `vramscope run`, where there is no
// command output to show.
const outputNotice = "o shows a command's output under `vramscope run -- COMMAND` only"

// tabNotice answers tab when there is no other process to show.
func tabNotice(processes int) string {
	if processes == 0 {
		return "tab: no training process yet"
	}
	return "tab: one training process, no other to show"
}
