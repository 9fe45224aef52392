package record

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/vramscope/vramscope/session"
)

// maxLine bounds one line of a recording; a longer line is skipped.
const maxLine = 4 << 20

// maxHeader bounds the first line: a header is a few hundred bytes, so a
// file whose first MiB has no newline (/dev/zero, a binary) is not a
// recording, and is not read further.
const maxHeader = 1 << 20

// maxWarnings bounds how many warnings a Reader keeps; the rest are counted.
const maxWarnings = 100

// Reader reads a recording's events in order. It is not safe for
// concurrent use.
type Reader struct {
	name     string
	f        *os.File
	gz       *gzip.Reader
	br       *bufio.Reader
	header   Header
	line     int
	pending  []byte
	warnings []string
	dropped  int
	done     bool
	sink     *readWarnings // set while Each's reader goroutine reads
}

// Open opens a recording, plain or gzip (told by its magic bytes, not its
// name), and reads its header. It fails on a file that is not a recording
// or whose format is newer than this build reads.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	r, err := newReader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
}

// NewReader reads a recording from src; name is used in messages.
func NewReader(name string, src io.Reader) (*Reader, error) {
	return newReader(name, src)
}

func newReader(name string, src io.Reader) (*Reader, error) {
	r := &Reader{name: name}
	br := bufio.NewReaderSize(src, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip header: %w", name, err)
		}
		r.gz = gz
		br = bufio.NewReaderSize(gz, 64<<10)
	}
	r.br = br
	line, complete, err := r.readHeader()
	if err != nil && !isEnd(err) {
		return nil, fmt.Errorf("%s: read header: %w", name, err)
	}
	if len(line) == 0 && isEnd(err) {
		return nil, fmt.Errorf("%s: %w (the file is empty)", name, errNotRecording)
	}
	h, herr := parseHeader(line)
	if herr != nil {
		return nil, fmt.Errorf("%s: %w", name, herr)
	}
	if !complete {
		r.warn("line 1: header has no newline: the recording holds no events")
	}
	r.header = h
	return r, nil
}

// readHeader reads the first line, at most maxHeader bytes of it.
func (r *Reader) readHeader() (line []byte, complete bool, err error) {
	r.line++
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.pending = append(r.pending, chunk...)
		if len(r.pending) > maxHeader {
			return nil, false, fmt.Errorf("%w (its first %d bytes hold no line break: the first line of a recording is its header, a few hundred bytes)", errNotRecording, maxHeader)
		}
		switch {
		case err == nil:
			return r.pending[:len(r.pending)-1], true, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return r.pending, false, err
		}
	}
}

// isEnd reports whether err ends the stream: EOF, or a truncated gzip
// stream (the writer was killed before Close).
func isEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// damaged reports whether err is corruption inside a gzip stream (bad
// deflate data, a checksum or a second member's header), rather than a
// failure to read the file: the events before it are worth keeping.
func damaged(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.As(err, &corrupt) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader)
}

// readLine returns the next line without its newline. complete is false
// for a last line that has no newline. err is non-nil only with the
// stream's end or a failure, and then line holds any bytes before it.
func (r *Reader) readLine() (line []byte, complete bool, err error) {
	r.line++
	r.pending = r.pending[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(r.pending) == 0 {
				return chunk[:len(chunk)-1], true, nil
			}
			r.pending = append(r.pending, chunk[:len(chunk)-1]...)
			return r.pending, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(r.pending)+len(chunk) > maxLine {
				if err := r.skipLine(); err != nil {
					return nil, false, err
				}
				r.warn(fmt.Sprintf("line %d: longer than %d bytes; skipped", r.line, maxLine))
				r.line++
				r.pending = r.pending[:0]
				continue
			}
			r.pending = append(r.pending, chunk...)
		default:
			r.pending = append(r.pending, chunk...)
			return r.pending, false, err
		}
	}
}

// skipLine discards up to and including the next newline.
func (r *Reader) skipLine() error {
	for {
		_, err := r.br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// Header returns the recording's header.
func (r *Reader) Header() Header { return r.header }

// Next returns the next event, or io.EOF after the last. A malformed line
// is skipped with a warning (see Warnings), and so is a torn last line,
// left by a writer that was killed; neither is an error. Only a failure to
// read the file is.
func (r *Reader) Next() (session.Event, error) {
	for {
		line, err := r.nextLine()
		if err != nil {
			return session.Event{}, err
		}
		e, perr := parseEvent(line)
		if perr != nil {
			r.warn(fmt.Sprintf("line %d: %v; skipped", r.line, perr))
			continue
		}
		return e, nil
	}
}

// nextLine returns the next complete, non-empty event line, valid until
// the next call, or io.EOF after the last. It skips what Next skips before
// parsing (a torn last line, empty lines), with the same warnings.
func (r *Reader) nextLine() ([]byte, error) {
	for !r.done {
		line, complete, err := r.readLine()
		if err != nil {
			r.done = true
			if len(line) > 0 {
				r.warn(fmt.Sprintf("line %d: torn last line (%d bytes, no newline); skipped: the writer was probably killed", r.line, len(line)))
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				r.warn("the gzip stream ends early: the writer did not close the file; events up to its last flush were read")
			} else if damaged(err) {
				// Past the cap too: it says why the rest is missing.
				r.warnAlways(fmt.Sprintf("line %d: the gzip stream is damaged (%v); the events before it were read, what follows is lost", r.line, err))
			} else if !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: read line %d: %w", r.name, r.line, err)
			}
			break
		}
		if !complete || len(line) == 0 {
			continue
		}
		return line, nil
	}
	return nil, io.EOF
}

func (r *Reader) warn(s string) {
	if r.sink != nil {
		r.sink.add(s, false)
		return
	}
	r.keep(s)
}

// warnAlways is warn past the cap.
func (r *Reader) warnAlways(s string) {
	if r.sink != nil {
		r.sink.add(s, true)
		return
	}
	r.warnings = append(r.warnings, s)
}

// keep adds a warning within the cap, else counts it.
func (r *Reader) keep(s string) {
	if len(r.warnings) < maxWarnings {
		r.warnings = append(r.warnings, s)
		return
	}
	r.dropped++
}

// Warnings returns one line per problem met so far (skipped lines, a torn
// end), at most 100 and then a count of the rest.
func (r *Reader) Warnings() []string {
	w := append([]string(nil), r.warnings...)
	if r.dropped > 0 {
		w = append(w, fmt.Sprintf("%d more warnings", r.dropped))
	}
	return w
}

// Close releases the file (when Open opened it).
func (r *Reader) Close() error {
	if r.gz != nil {
		r.gz.Close()
	}
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}
