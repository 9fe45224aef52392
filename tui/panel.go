package tui

import (
	"fmt"
	"math"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// panelMinWidth is the terminal width from which the anatomy panel shows.
const panelMinWidth = 120

// layerLooks are the stacked bar's letters and colours, in List order.
var layerLooks = []struct {
	letter string
	color  lipgloss.Color
}{
	{"W", "12"}, {"G", "14"}, {"O", "13"}, {"A", "10"}, {"T", "11"},
	{"C", "8"}, {"N", "9"}, {"X", "7"},
}

// layerStyles are the layers' letter styles, and layerBars their bar
// styles (the letter on the colour), in List order.
var layerStyles, layerBars = func() (fg, bar []lipgloss.Style) {
	for _, l := range layerLooks {
		fg = append(fg, lipgloss.NewStyle().Foreground(l.color))
		bar = append(bar, lipgloss.NewStyle().Background(l.color).Foreground(lipgloss.Color("0")))
	}
	return fg, bar
}()

// anatomyKey is everything the panel is drawn from.
type anatomyKey struct {
	b     diagnose.Breakdown
	total session.Bytes
	w, h  int
}

var anatomies memo[anatomyKey]

// anatomyKept is anatomyView, drawn again only when a figure it shows
// moved (its "now" column follows the samples, the rest moves at phase
// edges).
func anatomyKept(b diagnose.Breakdown, total session.Bytes, w, h int) string {
	return anatomies.get(anatomyKey{b, total, w, h}, func() string { return anatomyView(b, total, w, h) })
}

// anatomyView renders the memory layers of the process, now and at its
// session peak, as a stacked bar and a table, in w × h cells.
func anatomyView(b diagnose.Breakdown, total session.Bytes, w, h int) string {
	now, peak := b.Now.List(), b.Peak.List()
	lines := []string{styleHeading.Render("Memory anatomy")}
	lines = append(lines, stackedBar(now, w), "")
	lines = append(lines, styleDim.Render(fmt.Sprintf("%-19s%9s%9s", "", "now", "at peak")))
	for i, l := range now {
		atPeak := mib(peak[i].Bytes)
		if b.Peak.ProcessUsedStale && !peak[i].Bytes.Known() && fromProcessList(layerLooks[i].letter) {
			atPeak = "stale" // derived from the NVML process reading, which is
		}
		lines = append(lines, rendered(&layerStyles[i], layerLooks[i].letter)+fmt.Sprintf(" %-17s%9s%9s",
			clip(l.Name, 17), mib(l.Bytes), atPeak))
	}
	// The line under the layers: where the activations are withheld (stale,
	// or a forward under way), their sum with the temporaries, as the text
	// report gives it; else blank. Either way the panel keeps its height.
	under := ""
	if b.Now.ActivationsStale || b.Peak.ActivationsStale {
		under = fmt.Sprintf("  %-17s%9s%9s", "activ.+temps", mib(b.Now.Transient), mib(b.Peak.Transient))
	}
	if b.Now.Host { // host memory: one figure, no allocator or driver view
		hw, _ := ipc.WordsOf(ipc.SourceCPU)
		lines = append(lines, under,
			fmt.Sprintf("%-19s%9s%9s", "= "+hw.Figure, mib(b.Now.Allocated), mib(b.Peak.Allocated)),
			"", styleDim.Render("MiB of host "+hw.Figure+" · – not measured"))
	} else {
		lines = append(lines, under,
			fmt.Sprintf("%-19s%9s%9s", "allocated", mib(b.Now.Allocated), mib(b.Peak.Allocated)),
			fmt.Sprintf("%-19s%9s%9s", "reserved", mib(b.Now.Reserved), mib(b.Peak.Reserved)),
			fmt.Sprintf("%-19s%9s%9s", "NVML process", mib(b.Now.ProcessUsed), nvmlAtPeak(b.Peak)),
			"", styleDim.Render("MiB · – unknown (no source yet)"))
	}
	if n := diagnose.ActivationsBrief(b); n != "" { // how fresh the activations are
		rows := []string{n}
		if width(n) > w {
			rows = wrapHanging("", n, w, 2) // wrapped, never cut
		}
		for _, ln := range rows {
			lines = append(lines, styleDim.Render(ln))
		}
	}
	if b.Peak.Step >= 0 {
		lines = append(lines, styleDim.Render(fmt.Sprintf("peak: step %d, in %s", b.Peak.Step, b.Peak.Phase)))
	}
	if b.Now.Step >= 0 {
		lines = append(lines, styleDim.Render(fmt.Sprintf("now: step %d, in %s", b.Now.Step, b.Now.Phase)))
	}
	if total.Known() && b.Now.Reserved.Known() && total > 0 {
		lines = append(lines, styleDim.Render(fmt.Sprintf("reserved: %s of %s (%.0f%%)",
			gibText(b.Now.Reserved), gibText(total), 100*float64(b.Now.Reserved)/float64(total))))
	}
	return padLines(strings.Join(lines, "\n"), w, h)
}

// mib formats a layer in MiB, "–" when unknown.
func mib(b session.Bytes) string { return b.MiBString() }

// stackedBar splits w cells between the known layers, in proportion, each
// drawn with its letter (readable without colour) on its colour.
func stackedBar(layers []diagnose.Layer, w int) string {
	var sum float64
	for _, l := range layers {
		if l.Bytes.Known() {
			sum += float64(l.Bytes)
		}
	}
	if sum <= 0 || w <= 2 {
		return styleDim.Render("[" + strings.Repeat("·", max(w-2, 0)) + "]")
	}
	inner := w - 2
	var b strings.Builder
	b.WriteString("[")
	used, acc := 0, 0.0
	for i, l := range layers {
		if !l.Bytes.Known() || l.Bytes == 0 {
			continue
		}
		acc += float64(l.Bytes)
		n := int(acc/sum*float64(inner)+0.5) - used
		if n <= 0 {
			continue
		}
		used += n
		b.WriteString(rendered(&layerBars[i], strings.Repeat(layerLooks[i].letter, n)))
	}
	b.WriteString(strings.Repeat(" ", max(inner-used, 0)) + "]")
	return b.String()
}

// gibText is a short GiB figure: "4.4 GiB", "80 GiB".
func gibText(b session.Bytes) string {
	if !b.Known() {
		return "–"
	}
	return trimZero(math.Round(float64(b)/gib*10)/10) + " GiB"
}

// nvmlAtPeak is the per-process NVML figure at the peak, or "stale" when no
// reading of the peak's moment exists (the 1 Hz process list read before
// it), so an older figure is never shown as the peak's.
// fromProcessList reports whether a layer (by letter) is derived from the
// NVML process list: non-PyTorch and other processes.
func fromProcessList(letter string) bool { return letter == "N" || letter == "X" }

func nvmlAtPeak(l diagnose.Layers) string {
	if l.ProcessUsedStale {
		return "stale"
	}
	return mib(l.ProcessUsed)
}
