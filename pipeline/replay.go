package pipeline

import (
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/tui"
)

// OpenReplay is record.OpenReplay with its stream typed for the TUI's
// replay: the recording-reader source of a replay pipeline.
func OpenReplay(path string) (record.Header, func() (tui.ReplayStream, error), *record.ReplayWarnings, error) {
	hdr, open, warned, err := record.OpenReplay(path)
	if err != nil {
		return hdr, nil, nil, err
	}
	stream := func() (tui.ReplayStream, error) {
		r, err := open()
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return hdr, stream, warned, nil
}

var _ tui.ReplayEnder = (*record.PacedReader)(nil)
