package record

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
	"github.com/vramscope/vramscope/session"
)

// PacedEnd returns when a replay of the recording at path ends: the time
// of its last event once paced by session.Pacer, exactly what reading it
// with Next and pacing every event finds (the zero time when it holds no
// event). It reads only what pacing needs from each line (t, conn, gpu.at,
// msg.t) without decoding the events, and decodes in full only the lines
// it cannot read so (a hook message with a clock among them) and, at the
// end, the line that set the end, to check that Next would take it. Should
// that line be one Next skips, it reads the recording again in full.
func PacedEnd(ctx context.Context, path string) (time.Time, error) {
	r, err := Open(path)
	if err != nil {
		return time.Time{}, err
	}
	end, ok, err := r.lightPacedEnd(ctx)
	r.Close()
	if err != nil || ok {
		return end, err
	}
	if r, err = Open(path); err != nil {
		return time.Time{}, err
	}
	defer r.Close()
	return r.fullPacedEnd(ctx)
}

// cancelEvery is how many lines a pass reads between looks at its context.
const cancelEvery = 4096

// fullPacedEnd paces every event that Next returns.
func (r *Reader) fullPacedEnd(ctx context.Context) (time.Time, error) {
	var (
		pacer session.Pacer
		end   time.Time
	)
	for n := 0; ; n++ {
		if n%cancelEvery == 0 && ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return end, nil
		}
		if err != nil {
			return time.Time{}, err
		}
		pacer.Pace(&ev)
		end = ev.At
	}
}

// lightPacedEnd is PacedEnd's light pass. ok is false when the line that
// set the end turns out to be one Next skips: the end is then unknown.
//
// Paced times never decrease, so the end is the highest timeline time of
// any event. A line read lightly but malformed matters only when it sets
// that maximum (or a clock, but clock lines are decoded in full), so only
// that one line needs checking.
func (r *Reader) lightPacedEnd(ctx context.Context) (end time.Time, ok bool, err error) {
	var (
		pacer session.Pacer
		msg   ipc.Message  // reused: Pace keeps a copy only of a clock
		gpu   probe.Sample // reused: Pace reads only At
		best  []byte       // the light line that set end; empty when decoded
		have  bool
	)
	for n := 0; ; n++ {
		if n%cancelEvery == 0 && ctx.Err() != nil {
			return time.Time{}, false, ctx.Err()
		}
		line, err := r.nextLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return time.Time{}, false, err
		}
		ev, light := lightEvent(line, &msg, &gpu)
		if !light {
			if ev, err = parseEvent(line); err != nil {
				continue // Next skips it too
			}
		}
		pacer.Pace(&ev)
		if !have || ev.At.After(end) {
			end, have = ev.At, true
			best = best[:0]
			if light {
				best = append(best, line...)
			}
		}
	}
	if len(best) > 0 {
		if _, err := parseEvent(best); err != nil {
			return time.Time{}, false, nil
		}
	}
	return end, true, nil
}
