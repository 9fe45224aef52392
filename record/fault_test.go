package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/tinyfs"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

// A full disk. On a real 64 KiB filesystem the writer
// reports ENOSPC from Write within a flush, keeps it (Err), and the file
// still reads up to what reached the disk.
func TestFullDiskIsReported(t *testing.T) {
	dir := tinyfs.Mount(t, 64<<10)
	path := filepath.Join(dir, "r.jsonl")
	w, err := Create(path, fixtureHeader(), WithFlushInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ev := session.Event{At: time.Unix(1763794800, 0), Conn: 1, Note: &session.Note{Kind: session.NoteConnect, Text: strings.Repeat("n", 200)}}
	var werr error
	n := 0
	for ; n < 10000 && werr == nil; n++ {
		werr = w.Write(ev)
		time.Sleep(10 * time.Microsecond)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("after %d writes: %v, want ENOSPC", n, werr)
	}
	if !errors.Is(w.Err(), syscall.ENOSPC) {
		t.Errorf("Err() = %v after a failed write", w.Err())
	}
	if err := w.Write(ev); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a write after the failure returned %v", err)
	}
	w.Close()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := 0
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		read++
	}
	if read == 0 || read >= n {
		t.Errorf("%d events read back of %d written before the disk filled", read, n)
	}
}

// The background flush fails with no Write to
// report it; Err tells.
func TestBackgroundFlushFailureIsKept(t *testing.T) {
	dir := tinyfs.Mount(t, 16<<10)
	path := filepath.Join(dir, "r.jsonl")
	w, err := Create(path, fixtureHeader(), WithFlushInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	big := session.Event{At: time.Unix(1763794800, 0), Conn: 1, Note: &session.Note{Kind: session.NoteConnect, Text: strings.Repeat("n", 3000)}}
	for i := 0; i < 8; i++ { // 24 KiB: stays in the 64 KiB buffer
		if err := w.Write(big); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(w.Err(), syscall.ENOSPC) {
		t.Errorf("Err() = %v, want the background flush's ENOSPC", w.Err())
	}
}

// Recordings were created 0644 while the socket
// is 0600; they hold argv and host names.
func TestRecordingIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w := writeAll(t, path, fixtureHeader(), nil)
	w.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("recording mode %04o, want 0600", fi.Mode().Perm())
	}
}

// A header line had no size bound; `report /dev/zero`
// never returned. The reader gives up after maxHeader bytes.
func TestHeaderIsBounded(t *testing.T) {
	src := &countingZeros{}
	_, err := NewReader("zeros", src)
	if err == nil || !strings.Contains(err.Error(), "not a vramscope recording") || !strings.Contains(err.Error(), "no line break") {
		t.Fatalf("err = %v", err)
	}
	if src.n > maxHeader+128<<10 {
		t.Errorf("read %d bytes of an endless first line, want about %d", src.n, maxHeader)
	}
	// A header just under the bound still reads.
	var b bytes.Buffer
	b.WriteString(`{"vramscope_recording":1,"version":"1.0","tool":"` + strings.Repeat("x", maxHeader-200) + `"}` + "\n")
	if _, err := NewReader("long", &b); err != nil {
		t.Errorf("a header of %d bytes: %v", maxHeader-100, err)
	}
}

type countingZeros struct{ n int }

func (z *countingZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += len(p)
	return len(p), nil
}

// Report salvaged nothing from a damaged gzip. Bytes
// overwritten in the middle of the stream: the reader returns the events
// before the damage, warns once about it, and ends without an error.
func TestDamagedGzipKeepsWhatPrecedes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl.gz")
	w, err := Create(path, fixtureHeader())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20000; i++ {
		m := &ipc.Message{V: 1, Type: ipc.TypeSample, Seq: uint64(i + 1), T: float64(i), Mem: &ipc.Mem{Allocated: int64(i) * 4096, Reserved: 1 << 30}}
		if err := w.Write(session.Event{At: time.Unix(1763794800, int64(i)*1e6), Conn: 1, Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	full, _ := os.ReadFile(path)
	for _, at := range []int{len(full) / 3, len(full) / 2, 2 * len(full) / 3} {
		bad := append([]byte(nil), full...)
		copy(bad[at:], bytes.Repeat([]byte{0xa5}, 32))
		r, err := NewReader("damaged", bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("damage at %d: Next failed after %d events: %v", at, n, err)
			}
			n++
		}
		ws := strings.Join(r.Warnings(), "\n")
		if !strings.Contains(ws, "the gzip stream is damaged") {
			t.Errorf("damage at %d: warnings %q", at, ws)
		}
		if n < 20000*at/len(full)/2 || n >= 20000 {
			t.Errorf("damage at %d of %d bytes: %d events of 20000 kept", at, len(full), n)
		}
	}
}
