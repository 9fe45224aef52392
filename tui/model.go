// Package tui is vramscope's live view: a bubbletea program that renders a
// session.Store (memory chart with the training phases, step table, warmup
// banner, memory anatomy) from the events a Source hands it, or replays
// recorded events on a virtual clock. It does no I/O in Update: sources and
// the recorder are interfaces it defines, called from commands.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/session"
)

// frameTick paces rendering: batches are applied as they come, frames are
// drawn at most fps times a second.
type frameTick time.Time

// zoomLevels are the chart windows +/- step through; one past the last is
// the whole session.
var zoomLevels = []time.Duration{
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
	5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
	6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

const defaultZoom = 3 // one minute

// Model is the TUI's root model. It routes: global keys here, the table's
// keys to the table, sizes to the children. Build it with New.
type Model struct {
	cfg    config
	store  *session.Store
	keys   keyMap
	help   help.Model
	ctx    context.Context
	cancel context.CancelFunc
	replay *replayClock

	w, h     int
	focus    focus    // which process is shown
	exits    *exitLog // which processes said goodbye
	zoom     int
	anchor   time.Time // right edge of the chart when scrolled back; zero follows
	paused   bool
	frozen   time.Time     // live pause: the chart's right edge when the view froze
	frozenT  time.Duration // live pause: the header's elapsed time when it froze
	frozenAt int           // live pause: the newest step shown
	bannerH  int           // rows the diagnosis banner took in the last frame
	page     page          // the main view, or one panel on the whole body
	pg       pager         // the open page's scroll position

	recPath, recErr, srcErr string

	cmdEnded  string // how the command (WithCommand) ended, escaped; "" while it runs
	quitAsked bool   // q was pressed once while the command runs
	notice    string // why the last key did nothing, in the footer until the next key

	outLines []string // the output page's lines, escaped
	outErr   string   // why the output log could not be read
	outFresh bool     // the page just opened: show the end
	// censusNote says what became of the last census request (c key).
	censusNote string

	chart *memChart
	table stepsTable
	diag  *diagCache
	dirty bool
	frame string

	ticking  bool // a frame tick is pending
	clocking bool // a clock tick is pending
	reading  bool // a waitBatch is pending
	srcDone  bool // the source ended: read no more
}

// New builds the model. Without WithSource or WithReplayStream it shows
// the waiting screen.
func New(opts ...Option) Model {
	cfg := config{fps: 15, clock: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := Model{
		cfg: cfg, store: session.New(session.WithLiveBounds()), ctx: ctx, cancel: cancel,
		keys: newKeyMap(cfg.replayOpen != nil, cfg.recorder != nil, cfg.outputLog != ""), help: help.New(),
		zoom: defaultZoom, chart: newMemChart(), table: newStepsTable(), diag: &diagCache{},
		exits: newExitLog(), w: 80, h: 24, dirty: true,
	}
	if cfg.replayOpen != nil {
		m.replay = newStreamClock(cfg.replayOpen, &replayStream{ctx: ctx})
		m.replay.exits = m.exits
	}
	m.follow()
	m.reading = cfg.source != nil && m.replay == nil // Init starts the first read
	if cfg.recorder != nil {
		m.recPath = cfg.recorder.Path() // before the program starts, not in Update
	}
	m.resize(m.w, m.h)
	return m
}

// Store is the store the model renders (replay seeks replace it).
func (m Model) Store() *session.Store { return m.store }

// Init starts the source reader, and the frame clock of a replay. Init
// cannot keep state (its receiver is a copy): the first frame tick is not
// marked pending, which at worst arms one extra tick.
func (m Model) Init() tea.Cmd {
	var cmds []tea.Cmd
	if m.cfg.source != nil && m.replay == nil {
		cmds = append(cmds, waitBatch(m.ctx, m.cfg.source))
	}
	if m.cfg.command != nil {
		cmds = append(cmds, waitCommand(m.cfg.command))
	}
	if m.replay != nil {
		cmds = append(cmds, tea.Tick(time.Second/time.Duration(m.cfg.fps), func(t time.Time) tea.Msg { return frameTick(t) }))
		cmds = append(cmds, m.replayCmd()) // a streamed replay starts its reader
	}
	return tea.Batch(cmds...)
}

// Update routes a message and returns the next model.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
		m.render()
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	case batchMsg:
		m.store.ApplyAll(msg)
		m.exits.note(m.store, msg)
		m.dirty, m.reading = true, false // the next frame reads again
		return m, tea.Batch(m.armFrame(), m.armClock(), watchRecording(m.cfg.recorder, m.recPath))
	case sourceErrMsg:
		m.reading, m.srcDone = false, true
		m.logf("source: %v", msg.err)
		if !errors.Is(msg.err, io.EOF) { // EOF: the feed simply ended
			m.srcErr = msg.err.Error()
		}
		m.render()
		return m, nil
	case recordMsg:
		m.recPath, m.recErr = msg.path, ""
		if msg.err != nil {
			m.recErr = msg.err.Error()
			m.logf("record: %v", msg.err)
		}
		m.render()
		return m, nil
	case frameTick:
		return m, tea.Batch(m.onFrame(time.Time(msg)), m.replayCmd())
	case replayMsg:
		return m, m.onReplay(msg)
	case replayEndMsg:
		m.onReplayEnd(msg)
		return m, m.armFrame()
	case clockTick:
		return m, m.onClock()
	case commandDoneMsg:
		cmd := m.onCommandDone(msg)
		return m, cmd
	case outputMsg:
		cmd := m.onOutput(msg)
		m.render()
		return m, cmd
	case censusAsked:
		if msg.err != nil {
			m.censusNote = "could not ask for a census: " + msg.err.Error()
		}
		m.render()
	case outputTick:
		if m.page == pageOutput {
			return m, readOutput(m.cfg.outputLog)
		}
	}
	return m, nil
}

// key handles the global keys and hands the rest to the steps table.
func (m Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	var cmd tea.Cmd
	asked := m.quitAsked
	m.quitAsked, m.notice = false, "" // any other key goes on
	switch {
	case msg.String() == "q" && m.commandRunning() && !asked:
		m.quitAsked = true // ending the view ends the training: ask once
	case key.Matches(msg, k.Quit):
		m.cancel()
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.open(pageHelp)
	case key.Matches(msg, k.Diag):
		m.open(pageDiag)
	case key.Matches(msg, k.Anatomy):
		m.open(pageAnatomy)
	case key.Matches(msg, k.Census):
		if m.open(pageCensus); m.page == pageCensus {
			cmd = m.askCensus()
		}
	case key.Matches(msg, k.Output):
		if m.open(pageOutput); m.page == pageOutput {
			m.outFresh = true
			cmd = readOutput(m.cfg.outputLog)
		}
	case key.Matches(msg, k.Back):
		m.page = pageMain
	case key.Matches(msg, k.Pause):
		m.togglePause()
		cmd = m.armFrame() // a resumed replay plays again
	case key.Matches(msg, k.Left):
		m.scroll(-1)
	case key.Matches(msg, k.Right):
		m.scroll(1)
	case key.Matches(msg, k.ZoomIn):
		m.zoomBy(-1)
	case key.Matches(msg, k.ZoomOut):
		m.zoomBy(1)
	case key.Matches(msg, k.Tab):
		if m.focus.pick(m.store) {
			m.refocus()
		} else {
			m.notice = tabNotice(len(m.store.Processes()))
		}
	case msg.String() == "o" && !k.Output.Enabled():
		m.notice = outputNotice
	case key.Matches(msg, k.Speed):
		if m.replay != nil {
			m.replay.speed = (m.replay.speed + 1) % len(speedNames)
		}
	case key.Matches(msg, k.Record):
		cmd = toggleRecording(m.cfg.recorder, m.recPath != "", m.cfg.recordPath)
	case m.page == pageMain && key.Matches(msg, k.End):
		m.anchor = time.Time{} // the chart follows again, with the table
		m.table = m.table.update(msg, k, m.visibleSteps(m.process()))
	case m.page != pageMain:
		p := m.process()
		m.pg = m.pg.update(msg, k, len(m.pageLines(p, m.diagnosis(p))), m.layout().bodyH)
	default:
		m.table = m.table.update(msg, k, m.visibleSteps(m.process()))
	}
	m.render()
	return m, tea.Batch(cmd, m.replayCmd()) // a seek may have restarted the replay's reader
}

func (m *Model) togglePause() {
	if m.replay != nil {
		m.replay.paused = !m.replay.paused
		m.replay.lastTick = time.Time{} // no jump for the time spent paused
		return
	}
	if m.paused {
		m.paused = false
		m.anchor = time.Time{} // resume follows the live edge, scrolled back or not
		return
	}
	// Read the clock and the edge before pausing: now() and elapsed() answer
	// from the frozen fields once paused.
	m.frozen, m.frozenT, m.frozenAt = m.now(), m.elapsed(), -1
	if p := m.process(); p != nil {
		if st := p.Steps(); len(st) > 0 {
			m.frozenAt = st[len(st)-1].Index
		}
	}
	m.paused = true
}

// process is the process shown, nil before the first.
func (m *Model) process() *session.Process {
	if m.focus.key == "" {
		return nil
	}
	return m.store.Process(m.focus.key)
}

// follow moves the focus after the store changed (focus.go says how).
func (m *Model) follow() {
	if m.focus.follow(m.store) {
		m.refocus()
	}
}

// refocus resets what belongs to the process shown before.
func (m *Model) refocus() {
	m.table = newStepsTable()
	m.table.w, m.table.h = m.tableSize()
	m.pg = pager{}
}

// open shows a page, or the main view when it is open already.
func (m *Model) open(p page) {
	if m.page == p {
		m.page = pageMain
		return
	}
	m.page, m.pg = p, pager{}
}

// diagnosis is the shown process's diagnosis, nil before the first.
func (m *Model) diagnosis(p *session.Process) *diagnose.Diagnosis {
	if p == nil {
		return nil
	}
	return m.diag.get(m.store, p)
}

// now is the right edge of the live view: the newest data, the frozen
// instant while paused, the virtual clock in replay.
func (m *Model) now() time.Time {
	switch {
	case m.replay != nil:
		return m.replay.now
	case m.paused:
		return m.frozen
	}
	return m.store.Last()
}

// elapsed is the session time shown in the header: up to the wall clock
// while a process is connected (the run goes on between messages), but
// never behind the newest data (a demo faster than real time), and up to
// the newest data once every process is gone.
func (m *Model) elapsed() time.Duration {
	if m.paused && m.replay == nil {
		return m.frozenT // the clock that was on screen
	}
	end := m.now()
	if m.replay == nil && !m.paused && m.anyConnected() {
		if c := m.cfg.clock(); c.After(end) {
			end = c
		}
	}
	return end.Sub(m.store.Start())
}

// visibleSteps are the steps of p the table shows (up to the frozen one
// while paused).
func (m *Model) visibleSteps(p *session.Process) []*session.Step {
	if p == nil {
		return nil
	}
	st := p.Steps()
	if m.paused {
		for len(st) > 0 && st[len(st)-1].Index > m.frozenAt {
			st = st[:len(st)-1]
		}
	}
	return st
}

func (m *Model) logf(format string, args ...any) {
	if m.cfg.debug != nil {
		fmt.Fprintf(m.cfg.debug, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
}

var _ tea.Model = Model{}
