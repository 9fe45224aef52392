package record

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/vramscope/vramscope/internal/jsonscan"
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

// lightEvent reads of an event line only what Pacer uses, into an event
// whose Msg or GPU (when the line is one) points to msg or gpu. It returns
// false for a line it cannot read so, which the caller decodes in full:
// anything but one object with the keys spelled as written (encoding/json
// would match "T" or "Conn" too), a hook message with a clock, which
// changes the pacing of what follows, or a kind whose value is not an
// object. Where it returns true the times equal a full decode's when the
// line is an event at all; whether it is, it does not check.
func lightEvent(line []byte, msg *ipc.Message, gpu *probe.Sample) (session.Event, bool) {
	p := scanner{jsonscan.Scanner{B: line}}
	var (
		ev          session.Event
		seen        [5]bool // t, conn, msg, gpu, note
		tLit, gpuAt []byte
		msgT        float64
		kinds       int
	)
	ok := p.Object(func(key []byte) bool {
		k := lineKey(key)
		if k < 0 {
			return len(key) > 4 || !foldsTo(key, "t", "conn", "msg", "gpu", "note") && p.SkipValue()
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		switch k {
		case 0:
			var ok bool
			tLit, ok = p.Number(false)
			return ok
		case 1:
			return p.Uint64(&ev.Conn)
		case 2:
			kinds++
			return p.lightMsg(&msgT)
		case 3:
			kinds++
			return p.lightGPU(&gpuAt)
		default:
			kinds++
			return p.Peek('{') && p.SkipValue()
		}
	})
	p.Space()
	if !ok || p.I != len(p.B) || tLit == nil || kinds != 1 {
		return session.Event{}, false
	}
	at, err := lightTime(tLit)
	if err != nil {
		return session.Event{}, false
	}
	ev.At = at
	switch {
	case seen[2]:
		*msg = ipc.Message{T: msgT}
		ev.Msg = msg
	case seen[3]:
		*gpu = probe.Sample{At: at}
		if gpuAt != nil {
			if gpu.At, err = lightTime(gpuAt); err != nil {
				return session.Event{}, false
			}
		}
		ev.GPU = gpu
	}
	return ev, true
}

// lightMsg reads a hook message's t (0 when absent, as a decode leaves
// it); false for one with a clock.
func (p *scanner) lightMsg(t *float64) bool {
	if !p.Peek('{') {
		return false
	}
	seenT := false
	return p.Object(func(key []byte) bool {
		switch {
		case string(key) == "t" && !seenT:
			seenT = true
			lit, ok := p.Number(false)
			if !ok {
				return false
			}
			v, err := strconv.ParseFloat(string(lit), 64)
			*t = v
			return err == nil
		case (len(key) == 1 || len(key) == 5) && foldsTo(key, "t", "clock"):
			return false
		}
		return p.SkipValue()
	})
}

// lightGPU reads a gpu sample's at, left nil when absent.
func (p *scanner) lightGPU(at *[]byte) bool {
	if !p.Peek('{') {
		return false
	}
	return p.Object(func(key []byte) bool {
		switch {
		case string(key) == "at" && *at == nil:
			var ok bool
			*at, ok = p.Number(false)
			return ok
		case foldsTo(key, "at"):
			return false
		}
		return p.SkipValue()
	})
}

// foldsTo reports whether key matches one of names as encoding/json
// matches a key to a field (keys here are plain ASCII).
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// lightTime is parseTime without its allocation for the literal as the
// writer writes it (unix seconds, at most nine decimals); other literals
// go to parseTime.
func lightTime(lit []byte) (time.Time, error) {
	var sec, ns int64
	i := 0
	for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
		sec = sec*10 + int64(lit[i]-'0')
	}
	if i == 0 || i > 18 {
		return parseTime(lit)
	}
	if i < len(lit) {
		if lit[i] != '.' || len(lit)-i-1 > 9 {
			return parseTime(lit)
		}
		scale := int64(1e9)
		for i++; i < len(lit); i++ {
			c := lit[i]
			if c < '0' || c > '9' {
				return parseTime(lit)
			}
			scale /= 10
			ns += int64(c-'0') * scale
		}
	}
	at := time.Unix(sec, ns)
	return at, checkTime(at)
}
