package record

import (
	"fmt"
	"io"
	"runtime"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// readBatch is how many lines a parse worker takes at once.
const readBatch = 1024

// batch is a run of consecutive lines, then their events.
type batch struct {
	nums []int  // the lines' numbers in the file
	buf  []byte // the lines' bytes
	ends []int  // line i is buf[ends[i-1]:ends[i]]
	evs  []session.Event
	// msgs hold the batch's messages when its reader folds (Fold), and
	// mems their allocator figures: reused batch after batch, instead of
	// two allocations a line.
	msgs []ipc.Message
	mems []ipc.Mem
	errs []lineErr
	// reuse: decode into msgs.
	reuse bool
	read  readWarnings // what reading these lines warned of
	done  chan struct{}
}

// readWarnings are warnings met while reading a batch's lines, handed to
// the Reader in order by the goroutine that owns it.
type readWarnings struct {
	texts  []string
	always []bool // kept past the cap (see Reader.warnAlways)
}

func (w *readWarnings) add(s string, always bool) {
	w.texts = append(w.texts, s)
	w.always = append(w.always, always)
}

type lineErr struct {
	line int
	err  error
}

// Each reads every event that follows the header and hands it to each, in
// file order, with the same skips and warnings as Next. The lines are
// parsed on GOMAXPROCS goroutines while each runs, so a report of a
// million-step recording (10 million lines) takes the time of its slowest
// stage, not of all of them in turn. Events carry no
// Raw line. Each must not be mixed with Next on one Reader.
func (r *Reader) Each(each func(session.Event)) error { return r.each(each, false) }

// Fold is Each for a consumer that keeps nothing of an event's message
// beyond the call, nor its Mem, but what its other fields point to, as
// session.Store.Apply: the messages and their allocator figures (Mem) live
// in buffers that are reused batch after batch (what else they point to,
// such as Saved, is each message's own). A report then allocates neither
// a 600-byte message nor a 48-byte Mem a line: 64 busy ranks' 19 million
// lines made 440 MB of garbage in Mems alone.
func (r *Reader) Fold(each func(session.Event)) error { return r.each(each, true) }

func (r *Reader) each(each func(session.Event), reuse bool) error {
	workers := max(runtime.GOMAXPROCS(0), 1)
	todo := make(chan *batch, workers)
	inOrder := make(chan *batch, 2*workers)
	free := make(chan *batch, 3*workers)
	quit := make(chan struct{})
	defer close(quit)
	for range workers {
		go func() {
			for b := range todo {
				b.parse()
				close(b.done)
			}
		}()
	}
	var readErr error
	go func() {
		defer close(inOrder)
		defer close(todo)
		for {
			var b *batch
			select {
			case b = <-free:
			default:
				b = &batch{}
			}
			b.reset()
			b.reuse = reuse
			r.sink = &b.read
			for len(b.ends) < readBatch {
				line, err := r.nextLine()
				if err != nil {
					if err != io.EOF {
						readErr = err
					}
					break
				}
				b.nums = append(b.nums, r.line)
				b.buf = append(b.buf, line...)
				b.ends = append(b.ends, len(b.buf))
			}
			r.sink = nil
			if len(b.ends) == 0 && len(b.read.texts) == 0 {
				return
			}
			select {
			case inOrder <- b:
			case <-quit:
				return
			}
			todo <- b
			if len(b.ends) < readBatch {
				return
			}
		}
	}()
	for b := range inOrder {
		<-b.done
		for _, e := range b.errs {
			r.keep(fmt.Sprintf("line %d: %v; skipped", e.line, e.err))
		}
		for i, w := range b.read.texts {
			if b.read.always[i] {
				r.warnings = append(r.warnings, w)
			} else {
				r.keep(w)
			}
		}
		for i := range b.evs {
			each(b.evs[i])
		}
		select {
		case free <- b:
		default:
		}
	}
	return readErr
}

func (b *batch) reset() {
	b.buf, b.ends, b.nums, b.errs = b.buf[:0], b.ends[:0], b.nums[:0], b.errs[:0]
	b.read.texts, b.read.always = b.read.texts[:0], b.read.always[:0]
	clear(b.evs)
	b.evs = b.evs[:0]
	b.done = make(chan struct{})
}

// parse turns the batch's lines into events; a bad line becomes an error
// with its line number.
func (b *batch) parse() {
	dec := ipc.DecodeBare
	var slot *ipc.Message // the message of the line being parsed
	var mem *ipc.Mem      // and its allocator figures
	if b.reuse {
		if cap(b.msgs) < len(b.ends) {
			b.msgs = make([]ipc.Message, len(b.ends))
		}
		b.msgs = b.msgs[:len(b.ends)] // each is zeroed before its line is decoded
		if cap(b.mems) < len(b.ends) {
			b.mems = make([]ipc.Mem, len(b.ends))
		}
		b.mems = b.mems[:len(b.ends)]
		dec = func(line []byte) (*ipc.Message, error) {
			*slot = ipc.Message{} // a line may be decoded twice (fast, then encoding/json)
			if err := ipc.DecodeBareReusing(line, slot, mem); err != nil {
				return nil, err
			}
			return slot, nil
		}
	}
	start := 0
	for i, end := range b.ends {
		line := b.buf[start:end]
		start = end
		if b.reuse {
			slot, mem = &b.msgs[i], &b.mems[i]
		}
		e, err := parseEventWith(line, dec)
		if err != nil {
			b.errs = append(b.errs, lineErr{b.nums[i], err})
			continue
		}
		b.evs = append(b.evs, e)
	}
}

// FoldAll is ReadAll through Reader.Fold: for a consumer that keeps no
// event's message nor its Mem, as a session.Store (report).
func FoldAll(path string, each func(session.Event)) (Header, []string, error) {
	return readRecording(path, each, true)
}

// ReadAll streams a recording's events to each, in order (parsed on every
// core by Reader.Each), and
// returns the header and the reader's warnings (torn or bad lines skipped).
func ReadAll(path string, each func(session.Event)) (Header, []string, error) {
	return readRecording(path, each, false)
}

func readRecording(path string, each func(session.Event), reuse bool) (Header, []string, error) {
	r, err := Open(path)
	if err != nil {
		return Header{}, nil, err
	}
	defer r.Close()
	if err := r.each(each, reuse); err != nil {
		return r.Header(), r.Warnings(), fmt.Errorf("read %s: %w", path, err)
	}
	return r.Header(), r.Warnings(), nil
}
