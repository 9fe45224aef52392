package tui

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/vramscope/vramscope/internal/textesc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// headerView is the two header lines: the monitor's state, then the
// training process shown.
func (m *Model) headerView(p *session.Process) string {
	sep := rendered(&styleDim, " │ ")
	title := m.cfg.title
	if title == "" {
		title = "vramscope"
	}
	top := []string{rendered(&styleTitle, title), m.connText(p)}
	if !m.store.Start().IsZero() {
		top = append(top, "⏱ "+elapsed(m.elapsed(), false))
	}
	if m.recPath != "" {
		top = append(top, styleRec.Render("● REC")+" "+m.recPath)
	}
	if m.recErr != "" {
		top = append(top, styleBad.Render("record: "+m.recErr))
	}
	if p != nil && (p.Lost > 0 || p.Stats.Dropped > 0) {
		top = append(top, styleWarn.Render(fmt.Sprintf("⚠ lost %d · dropped %d", p.Lost, p.Stats.Dropped)))
	}
	if n := m.store.Refused; n > 0 {
		top = append(top, styleWarn.Render(fmt.Sprintf("⚠ refused %d connection%s (server full)", n, plural(n))))
	}
	if n := m.store.Skipped; n > 0 {
		// The monitor's own view fell behind; a recording has every event.
		top = append(top, styleWarn.Render(fmt.Sprintf("⚠ view behind: skipped %d events", n)))
	}
	if n := m.store.Errors; n > 0 {
		top = append(top, styleWarn.Render(fmt.Sprintf("⚠ skipped %d bad message%s", n, plural(n))))
	}
	if m.srcErr != "" {
		top = append(top, styleBad.Render("source: "+m.srcErr))
	}
	return m.fitTop(top, p, sep) + "\n" + m.fitProcess(p)
}

// fitTop is the first header line in the terminal's width: the device,
// last, is said more briefly until the line fits, then left out; the
// recording's directory goes next; then the title (`vramscope run`'s
// command line) is cut, so the connection state and the clock after it
// stay. Only a line that still does not fit is cut at its end.
func (m *Model) fitTop(top []string, p *session.Process, sep string) string {
	for level := 0; level <= devTerse; level++ {
		parts := top[:len(top):len(top)]
		if dev := m.deviceText(p, level); dev != "" {
			parts = append(parts, dev)
		}
		line := strings.Join(parts, sep)
		if width(line) <= m.w {
			return fitKept(line, m.w) // padded
		}
	}
	if m.recPath != "" {
		for i := range top {
			if strings.HasSuffix(top[i], " "+m.recPath) {
				top[i] = strings.TrimSuffix(top[i], m.recPath) + filepath.Base(m.recPath)
			}
		}
	}
	if over := width(strings.Join(top, sep)) - m.w; over > 0 && len(top) > 1 {
		if room := width(top[0]) - over; room >= minTitle {
			top[0] = truncate(top[0], room)
		}
	}
	return fitKept(strings.Join(top, sep), m.w)
}

// minTitle is the fewest cells a cut title keeps ("run: pyth…").
const minTitle = 10

// fitProcess is the second header line in the terminal's width: the
// process first, parts from the end left out until it fits.
func (m *Model) fitProcess(p *session.Process) string {
	parts := m.processParts(p)
	sep := rendered(&styleDim, " · ")
	for n := len(parts); n > 1; n-- {
		if line := strings.Join(parts[:n], sep); width(line) <= m.w {
			return fitKept(line, m.w) // padded
		}
	}
	return fitKept(strings.Join(parts, sep), m.w)
}

// deviceTotal is the one device total the screen shows, and whose it
// is: the driver's (NVML, as nvidia-smi shows it) when known, else what
// torch reported in the hello (torch's is a little lower: it leaves out
// memory the driver reserves).
func (m *Model) deviceTotal(p *session.Process) (session.Bytes, string) {
	var uuid string
	if p != nil && p.Hello.CUDA != nil {
		uuid = p.Hello.CUDA.UUID
	}
	if p != nil {
		if g := m.store.GPUFor(p); g != nil && g.Total.Known() && g.Total > 0 {
			return g.Total, "NVML"
		}
	}
	if d := pickDevice(m.cfg.devices, uuid); d != nil && d.Total > 0 {
		return session.Bytes(d.Total), "NVML"
	}
	if p != nil && p.Hello.CUDA != nil && p.Hello.CUDA.Total > 0 {
		return session.Bytes(p.Hello.CUDA.Total), "torch"
	}
	return session.Unknown, ""
}

// Levels of deviceText, each shorter than the one before.
const (
	devFull  = iota // total, name, NVML read time
	devName         // total and name
	devShort        // total and the name without its vendor
	devTotal        // the total only
	devTerse        // nothing
)

// deviceText names the GPU the shown process runs on, its total (one,
// labelled with its source), and how it is read; level says how briefly.
func (m *Model) deviceText(p *session.Process, level int) string {
	if level >= devTerse {
		return ""
	}
	if p != nil && p.OnCPU() {
		return "CPU run (no CUDA device)"
	}
	if text, ok := sourceText(p); ok {
		return text
	}
	name := ""
	var uuid string
	if p != nil && p.Hello.CUDA != nil {
		name, uuid = p.Hello.CUDA.Name, p.Hello.CUDA.UUID
	}
	if d := pickDevice(m.cfg.devices, uuid); d != nil {
		name = d.Name
	}
	name = textesc.String(name)
	dev := strings.TrimSpace(name)
	if level >= devShort {
		dev = strings.TrimPrefix(dev, "NVIDIA ")
	}

	switch st := m.cfg.status; {
	case st == "":
	case strings.Contains(st, "unavailable"):
		dev = strings.TrimSpace(dev + " " + styleWarn.Render(st))
	case strings.Contains(st, "simulated") && !strings.Contains(dev, "simulated"):
		dev = strings.TrimSpace(dev + " (simulated)")
	}
	if level >= devTotal {
		dev = strings.TrimPrefix(strings.TrimPrefix(dev, name), strings.TrimPrefix(name, "NVIDIA "))
		dev = strings.TrimSpace(dev) // what is said of the source: "(simulated)", "NVML unavailable"
	}
	if total, src := m.deviceTotal(p); total.Known() {
		// The total first, then the name. Shorter: "80 GiB (NVML) · A100…".
		word := " total "
		if level == devShort {
			word = " "
		}
		dev = strings.TrimSuffix(gibText(total)+word+"("+src+") · "+dev, " · ")
	}
	if dev == "" {
		dev = "no GPU known"
	}
	if g := m.gpuOf(p); g != nil && g.Last.Took > 0 && level == devFull {
		dev += rendered(&styleDim, fmt.Sprintf(" · NVML read %s (max %s)", tookText(g.Last.Took), tookText(g.MaxTook)))
	}
	if p != nil && p.GPUSource == "device" {
		dev += " " + styleWarn.Render(probe.NotVisibleNote)
	}
	return dev
}

// gpuOf is the NVML device the process runs on, else the only one seen.
func (m *Model) gpuOf(p *session.Process) *session.GPU {
	if p != nil {
		if g := m.store.GPUFor(p); g != nil {
			return g
		}
	}
	if gs := m.store.GPUs(); len(gs) == 1 {
		return gs[0]
	}
	return nil
}

// tookText formats an NVML call time: "0.8 ms", "12 ms".
func tookText(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// pickDevice is the device with the process's CUDA UUID, else the first.
func pickDevice(devs []probe.Device, uuid string) *probe.Device {
	for i := range devs {
		if uuid != "" && strings.EqualFold(strings.TrimPrefix(devs[i].UUID, "GPU-"), strings.TrimPrefix(uuid, "GPU-")) {
			return &devs[i]
		}
	}
	if len(devs) > 0 {
		return &devs[0]
	}
	return nil
}

// connText is the connection state, or the replay's.
func (m *Model) connText(p *session.Process) string {
	if m.replay != nil {
		r := m.replay
		state := "▶ " + speedNames[r.speed]
		if r.paused {
			state = "⏸ paused"
		}
		if r.done() {
			state = "■ ended"
		}
		if r.rebuilding() {
			state = "⟳ seeking back (re-reading the recording)"
		}
		return styleInfo.Render("replay "+state) + fmt.Sprintf(" %s/%s", elapsed(r.now.Sub(r.start), false), elapsed(r.length(), false))
	}
	if p == nil {
		if m.cmdEnded != "" {
			return styleBad.Render("■ command exited")
		}
		return rendered(&styleWarn, "◌ waiting for a training process")
	}
	return m.stateWord(p)
}

// processParts are the second header line's parts: which process, of how
// many, whether the view is paused, and what it runs.
func (m *Model) processParts(p *session.Process) []string {
	if p == nil {
		if m.replay != nil {
			return []string{styleDim.Render("no training process in this recording yet")}
		}
		parts := []string{styleDim.Render("listening on " + m.socketName())}
		if m.cfg.outputLog != "" { // a script that fails before it connects says so there
			parts = append([]string{m.outputPart()}, parts...)
		}
		return parts
	}
	h := &p.Hello
	ps := ordered(m.store)
	parts := []string{rendered(&styleBold, p.Label()) + fmt.Sprintf(" (%d/%d)", indexOf(ps, p.Key)+1, len(ps))}
	if m.replay != nil {
		parts = append(parts, m.stateWord(p)) // the first line tells the replay's state
	}
	if m.paused {
		parts = append(parts, styleWarn.Render("⏸ PAUSED (view frozen)"))
	}
	if m.cfg.outputLog != "" {
		parts = append(parts, m.outputPart())
	}
	if len(h.Argv) > 0 {
		parts = append(parts, textesc.Strings(h.Argv, " "))
	}
	if h.Torch != "" {
		parts = append(parts, "torch "+textesc.String(h.Torch))
	}
	if h.Host != "" {
		parts = append(parts, textesc.String(h.Host))
	}
	return parts
}

// outputPart says where the run command's output goes, and the key that
// shows it.
func (m *Model) outputPart() string {
	part := "output → " + m.cfg.outputLog + rendered(&styleDim, " (o shows it)")
	if width(part) > m.w { // the o page names the whole path
		part = "output → " + filepath.Base(m.cfg.outputLog) + rendered(&styleDim, " (o)")
	}
	return part
}

func (m *Model) socketName() string {
	if m.cfg.socket == "" {
		return "the vramscope socket"
	}
	return m.cfg.socket
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
