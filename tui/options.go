package tui

import (
	"io"
	"time"

	"github.com/vramscope/vramscope/probe"
)

// Option configures a Model built by New.
type Option func(*config)

// config is everything New takes; see the With functions for each field.
type config struct {
	source     Source
	recorder   Recorder
	recordPath string
	replayOpen func() (ReplayStream, error)
	status     string
	devices    []probe.Device
	title      string
	socket     string
	clock      func() time.Time
	fps        int
	debug      io.Writer

	trainingDefault string                     // WithTrainingDefault
	outputLog       string                     // WithOutputLog
	command         Command                    // WithCommand
	askCensus       func(process string) error // WithCensusAsker
}

// WithCensusAsker makes the c key ask the process on screen for a census
// of its live tensors (live mode): ask gets the process's session key and
// must not block (it queues the request).
func WithCensusAsker(ask func(process string) error) Option {
	return func(c *config) { c.askCensus = ask }
}

// WithSource makes the TUI live: it applies the batches src hands over.
func WithSource(src Source) Option { return func(c *config) { c.source = src } }

// WithRecorder enables the 'r' key: it starts recording into defaultPath,
// or stops the recording in progress (live mode only).
func WithRecorder(rec Recorder, defaultPath string) Option {
	return func(c *config) { c.recorder, c.recordPath = rec, defaultPath }
}

// WithReplayStream puts the TUI in replay mode over a recording it
// streams instead of holding: open reads it from the first event, paced
// for replay. The TUI calls open from goroutines, never in Update: to
// play, once more to find the recording's end, and again for each seek
// back (which replays into a fresh store in the background). Memory stays
// bounded whatever the recording's length. S is open's own stream type
// (record.OpenReplay's *record.PacedReader), so a caller hands its opener
// as it is.
func WithReplayStream[S ReplayStream](open func() (S, error)) Option {
	stream := func() (ReplayStream, error) {
		s, err := open()
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return s, nil
	}
	return func(c *config) { c.replayOpen = stream }
}

// WithDevice sets what the header says of the GPU: the sampler's status
// line ("NVML 12.550.54", "simulated", "NVML unavailable: <reason>") and
// the devices it lists.
func WithDevice(status string, devs []probe.Device) Option {
	return func(c *config) { c.status, c.devices = status, devs }
}

// WithTitle replaces "vramscope" at the left of the header.
func WithTitle(title string) Option { return func(c *config) { c.title = title } }

// WithCommand gives the view the training command `vramscope run`
// started: q asks once before ending it, and a command that exits before
// training says so on the waiting screen.
func WithCommand(c Command) Option { return func(cfg *config) { cfg.command = c } }

// WithSocket names the socket the monitor listens on, for the waiting
// message shown before any process connects.
func WithSocket(path string) Option { return func(c *config) { c.socket = path } }

// WithOutputLog names the file the training command's output goes to
// (`vramscope run`): the header says so, and o shows its last lines.
func WithOutputLog(path string) Option { return func(c *config) { c.outputLog = path } }

// WithTrainingDefault is the socket a training process connects to when its
// environment sets no VRAMSCOPE_SOCKET. When the monitor listens elsewhere
// (--socket), the waiting screen names the exact line the training side
// needs; without this option it cannot tell and says nothing of it.
func WithTrainingDefault(path string) Option { return func(c *config) { c.trainingDefault = path } }

// WithClock injects the wall clock the header's elapsed time is read from
// (default time.Now); tests use a fixed one.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithFPS caps how many frames a second are rendered (default 15, 1 to 60).
func WithFPS(n int) Option {
	return func(c *config) {
		if n >= 1 && n <= 60 {
			c.fps = n
		}
	}
}

// WithDebugLog makes the TUI write a line per notable event (source error,
// recording toggle, panic) to w, never to stdout or stderr.
func WithDebugLog(w io.Writer) Option { return func(c *config) { c.debug = w } }
