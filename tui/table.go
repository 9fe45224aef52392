package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/session"
)

// stepsTable is the step × phase table. It follows the newest step until
// the user scrolls up; top is then the index of the first step shown, so
// new steps do not move the rows under the reader's eyes.
type stepsTable struct {
	w, h   int
	top    int // step index of the first row when not following
	follow bool
}

// rowMarks says which rows to highlight.
type rowMarks struct {
	warmupFrom, warmupTo int // warmup steps, [from, to); empty when to <= from
	peak                 int // step that set the session peak, -1 if none
}

func newStepsTable() stepsTable { return stepsTable{follow: true} }

// rows is how many step rows fit: two header lines and one hint line.
func (t stepsTable) rows() int { return max(t.h-3, 1) }

// first is the position in steps of the first row shown.
func (t stepsTable) first(steps []*session.Step) int {
	n := t.rows()
	if t.follow || len(steps) <= n {
		return max(len(steps)-n, 0)
	}
	i := sort.Search(len(steps), func(i int) bool { return steps[i].Index >= t.top })
	return min(i, len(steps)-n)
}

// update handles the table's keys against the steps on display.
func (t stepsTable) update(msg tea.KeyMsg, k keyMap, steps []*session.Step) stepsTable {
	n, cur := t.rows(), t.first(steps)
	last := max(len(steps)-n, 0) // first row when at the bottom
	move := 0
	switch {
	case key.Matches(msg, k.Up):
		move = -1
	case key.Matches(msg, k.Down):
		move = 1
	case key.Matches(msg, k.PgUp):
		move = -n
	case key.Matches(msg, k.PgDown):
		move = n
	case key.Matches(msg, k.Home):
		move = -cur
	case key.Matches(msg, k.End):
		t.follow = true
		return t
	default:
		return t
	}
	to := min(max(cur+move, 0), last)
	if to >= last && move > 0 || last == 0 {
		t.follow = true
		return t
	}
	if to < last {
		t.follow, t.top = false, steps[to].Index
	}
	return t
}

// phaseColumns lists the phases of the steps shown: the automatic ones in
// the order they ran (the order of a step's phases, as the report, the CSV
// and the Perfetto trace give them: zero_grad first in a plain loop,
// forward first under Lightning), then the user's in order of appearance.
func phaseColumns(steps []*session.Step) []string {
	has := map[string]bool{}
	var auto, user []string
	for _, st := range steps {
		for _, c := range st.Phases {
			if has[c.Name] {
				continue
			}
			has[c.Name] = true
			if c.User {
				user = append(user, c.Name)
			} else {
				auto = append(auto, c.Name)
			}
		}
	}
	return append(auto, user...)
}

// view renders exactly t.h lines of t.w cells.
func (t stepsTable) view(steps []*session.Step, marks rowMarks) string {
	from := t.first(steps)
	shown := steps[from:min(from+t.rows(), len(steps))]
	cols := phaseColumns(shown)
	nameW, noOpt := stepNames(shown)
	// Each phase cell is "end peak" in MiB; narrow terminals keep the peak.
	cellW, both := 11, true
	fixed := 7 + nameW + 7 + 8
	for len(cols) > 0 && fixed+len(cols)*cellW > t.w {
		if both {
			cellW, both = 7, false
			continue
		}
		cols = cols[:len(cols)-1]
	}
	// A wide terminal gets more of each step (the table stayed about 80
	// columns wide at 200 without them): reserved peak, the memory held
	// between steps, the batch.
	extras := 0
	for extras < len(extraColumns) && fixed+len(cols)*cellW+(extras+1)*extraW <= t.w {
		extras++
	}
	var b strings.Builder
	b.Grow((t.w + 16) * t.h)
	h1 := fmt.Sprintf("%-*s", 7+nameW, "step")
	h2 := fmt.Sprintf("%-*s", 7+nameW, "")
	for _, c := range cols {
		h1 += fmt.Sprintf("%*s", cellW, clip(textesc.String(c), cellW-1))
		if both {
			h2 += fmt.Sprintf("%*s%*s", 5, "end", 6, "peak")
		} else {
			h2 += fmt.Sprintf("%*s", cellW, "peak")
		}
	}
	h1 += fmt.Sprintf("%7s%8s", "peak", "time")
	h2 += fmt.Sprintf("%7s%8s", "MiB", "")
	for _, x := range extraColumns[:extras] {
		h1 += fmt.Sprintf("%*s", extraW, x.name)
		h2 += fmt.Sprintf("%*s", extraW, x.unit)
	}
	b.WriteString(fitKept(rendered(&styleHeading, h1), t.w) + "\n" + fitKept(rendered(&styleDim, h2), t.w))
	for _, st := range shown {
		b.WriteByte('\n')
		b.WriteString(fitKept(t.row(st, cols, both, cellW, nameW, marks, extras), t.w))
	}
	for i := len(shown); i < t.rows(); i++ {
		b.WriteString("\n" + strings.Repeat(" ", max(t.w, 0)))
	}
	hint := rendered(&styleDim, tableLegend(shown, cols, t.w))
	if noOpt {
		hint = rendered(&styleDim, "no optimizer watched: a step ends at the next training forward after a backward")
	}
	if !t.follow && len(steps) > t.rows() {
		hint = rendered(&styleWarn, "following paused") + rendered(&styleDim, " — end/G to follow the newest step")
	}
	b.WriteString("\n" + fitKept(hint, t.w))
	return b.String()
}

// tableLegend explains the marks of the steps shown: `"` (a step read
// once, its phases those of an earlier step read in full) and n/r (a phase
// not read by design) only where one shows.
func tableLegend(shown []*session.Step, cols []string, w int) string {
	same, mixed := -1, false
	for _, st := range shown {
		if !st.Plain() || st.SameAs < 0 {
			continue
		}
		if same >= 0 && st.SameAs != same {
			mixed = true
		}
		same = st.SameAs
	}
	reads := ""
	switch {
	case mixed:
		reads = ` · " read once, as the last full read`
	case same >= 0:
		reads = fmt.Sprintf(` · " read once: same phases as step %d`, same)
	}
	tail := " · ≥ lower bound"
	if reads == "" {
		tail = " · ≥ lower bound (peak not exact)"
	}
	if anyNotRead(shown, cols) {
		tail += " · n/r not read"
	}
	if anyFailed(shown) {
		tail += " · ! failed"
	}
	const head = "▲ session peak · w warmup"
	if reads != "" && width(head+reads+tail) > w {
		reads = ` · " read once` // what gives way first at 80 columns
	}
	return head + reads + tail
}

// anyNotRead reports whether a row shown marks a phase n/r, as row does.
func anyNotRead(shown []*session.Step, cols []string) bool {
	for _, st := range shown {
		if st.Plain() {
			if st.SameAs < 0 && !st.Moved() {
				return true
			}
			continue
		}
		for _, name := range cols {
			if c := st.Cell(name); c != nil && !c.Read && !c.Inferred && st.Peak != session.Bound {
				return true
			}
		}
	}
	return false
}

// stepNames returns the width of the name column (0 unless the steps shown
// come from several watches: a GAN's D and G, docs/hook.md "Several
// models") and whether the steps show no optimizer: two steps or more, none
// with a step phase.
func stepNames(shown []*session.Step) (nameW int, noOpt bool) {
	first, several, stepped := "", false, false
	longest := 0
	for _, st := range shown {
		stepped = stepped || st.Stepped
		if st.Model == "" {
			continue
		}
		if first == "" {
			first = st.Model
		} else if st.Model != first {
			several = true
		}
		longest = max(longest, utf8.RuneCountInString(st.Model))
	}
	if several {
		nameW = min(longest, 8) + 1
	}
	return nameW, len(shown) >= 2 && !stepped
}

// extraColumns are the per-step figures a wide table adds after the time.
var extraColumns = []struct {
	name, unit string
	value      func(*session.Step) string
}{
	{"peak res", "MiB", func(st *session.Step) string { return st.PeakReserved.MiBString() }},
	{"held", "MiB", func(st *session.Step) string { return st.Held.MiBString() }},
	{"batch", "", func(st *session.Step) string {
		if st.Batch < 0 {
			return "–"
		}
		return strconv.FormatInt(st.Batch, 10)
	}},
}

const extraW = 10

// cellFigures writes a read cell: its peak, and with both its end first.
func cellFigures(b *strings.Builder, c *session.Cell, both bool, cellW int) {
	if both {
		padLeft(b, c.AllocatedEnd.MiBString(), 5)
		padLeft(b, peakText(c), 6)
		return
	}
	padLeft(b, peakText(c), cellW)
}

func (t stepsTable) row(st *session.Step, cols []string, both bool, cellW, nameW int, marks rowMarks, extras int) string {
	mark := " "
	warm := st.Index >= marks.warmupFrom && st.Index < marks.warmupTo
	switch {
	case st.Index == marks.peak:
		mark = "▲"
	case st.Failed != "":
		mark = "!" // a phase raised and the loop went on (docs/hook.md, "A step that failed")
	case warm:
		mark = "w"
	}
	// What fmt's "%s %-5d", "%*s" and "%7s%8s" wrote, without fmt: the
	// rows are most of the table's cost, and it is drawn every frame.
	var b strings.Builder
	b.Grow(24 + len(cols)*cellW)
	b.WriteString(mark + " ")
	padRight(&b, strconv.Itoa(st.Index), 5)
	if nameW > 0 {
		padRight(&b, clip(st.Model, nameW-1), nameW-1)
		b.WriteByte(' ')
	}
	for _, name := range cols {
		c := st.Cell(name)
		switch {
		case c == nil:
			padLeft(&b, "·", cellW)
		case c.User && c.Read:
			// A user phase (an evaluation, between_steps) reads at its own
			// edges, in a step read once too.
			cellFigures(&b, c, both, cellW)
		case st.Plain() && st.SameAs >= 0:
			// A plain step: read once, its phases those of step SameAs.
			padLeft(&b, `"`, cellW)
		case st.Moved():
			padLeft(&b, "–", cellW) // read once, moved: the next step is read by phase
		case st.Plain():
			padLeft(&b, notRead, cellW) // read once; the step it repeats left the table
		case !c.Read && !c.Inferred && st.Peak != session.Bound:
			padLeft(&b, notRead, cellW) // the step's reads cover it
		default:
			cellFigures(&b, c, both, cellW)
		}
	}
	padLeft(&b, stepPeakText(st), 7)
	padLeft(&b, durText(st), 8)
	for _, x := range extraColumns[:extras] {
		padLeft(&b, x.value(st), extraW)
	}
	s := b.String()
	switch {
	case st.Index == marks.peak:
		return rendered(&stylePeakRow, s)
	case warm:
		return rendered(&styleWarmRow, s)
	}
	return s
}

// notRead marks a phase the hook did not read by design: neither a bound
// nor a zero; the step's peak covers it.
const notRead = "n/r"

// peakText is a cell's peak in MiB, "≥" marking a lower bound, "=" one
// inferred from the exact step its step repeats.
func peakText(c *session.Cell) string {
	if !c.PeakAllocated.Known() {
		return "–"
	}
	switch {
	case c.Inferred:
		return "=" + c.PeakAllocated.MiBString()
	case !c.Exact:
		return "≥" + c.PeakAllocated.MiBString()
	}
	return c.PeakAllocated.MiBString()
}

// stepPeakText is a step's peak in MiB: "≥" marks a lower bound, "="
// a peak inferred from the exact step this one repeats.
// anyFailed reports whether a shown step failed (its row marked "!").
func anyFailed(shown []*session.Step) bool {
	for _, st := range shown {
		if st.Failed != "" {
			return true
		}
	}
	return false
}

func stepPeakText(st *session.Step) string {
	switch {
	case !st.PeakAllocated.Known():
		return "–"
	case st.Peak == session.Bound:
		return "≥" + st.PeakAllocated.MiBString()
	case st.Peak == session.Inferred:
		return "=" + st.PeakAllocated.MiBString()
	}
	return st.PeakAllocated.MiBString()
}

func durText(st *session.Step) string {
	d := st.Duration()
	if d <= 0 {
		return "–"
	}
	if d < 10e9 {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

// padLeft writes s right-aligned in w runes, as fmt's %*s does.
func padLeft(b *strings.Builder, s string, w int) {
	for n := utf8.RuneCountInString(s); n < w; n++ {
		b.WriteByte(' ')
	}
	b.WriteString(s)
}

// padRight writes s left-aligned in w runes, as fmt's %-*s does.
func padRight(b *strings.Builder, s string, w int) {
	b.WriteString(s)
	for n := utf8.RuneCountInString(s); n < w; n++ {
		b.WriteByte(' ')
	}
}

// clip cuts a plain string to n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}
