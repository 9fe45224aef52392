package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/tinyfs"
	"github.com/vramscope/vramscope/record"
)

// Faults (a full disk, floods, damaged files), run as the real binary.

// runExit runs the binary and returns its output and exit code, within 60 s.
func runExit(t *testing.T, bin string, args ...string) (stdout, stderr string, code int, took time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	code = 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code, time.Since(start)
}

// Finding 1: `demo --headless -o` on a full disk exited 0 with 68 of 200
// steps written. On a real 64 KiB filesystem it now says so and exits 1.
func TestDemoHeadlessOnAFullDiskFails(t *testing.T) {
	dir := tinyfs.Mount(t, 64<<10)
	bin := binary(t)
	out := filepath.Join(dir, "run.jsonl")
	stdout, stderr, code, _ := runExit(t, bin, "demo", "--headless", "--steps", "200", "-o", out)
	if code != 1 {
		t.Errorf("exit %d, want 1\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, "is incomplete") {
		t.Errorf("stderr does not say the recording is incomplete:\n%s", stderr)
	}
	if !strings.Contains(stdout, "totals: 200 steps") {
		t.Errorf("the report of the run itself is missing:\n%.400s", stdout)
	}
}

// Finding 1: `record` reported a full disk only when it stopped. It now
// says so at once and stops, exit 1, long before its --duration.
func TestRecordStopsAtOnceOnAFullDisk(t *testing.T) {
	dir := tinyfs.Mount(t, 64<<10)
	bin := binary(t)
	sockDir, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "d", "s.sock")
	cmd := exec.Command(bin, "record", "-o", filepath.Join(dir, "r.jsonl"), "--socket", sock, "--duration", "60s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record did not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	start := time.Now()
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, `{"v":1,"type":"hello","seq":0,"t":1.5,"session":"full","pid":42,"clock":{"mono":1.5,"wall":1763794800.25}}`+"\n")
	go func() {
		for seq := 1; seq < 200000; seq++ {
			fmt.Fprintf(w, `{"v":1,"type":"sample","seq":%d,"t":%d.5,"mem":{"allocated":%d,"max_allocated":1,"reserved":1,"max_reserved":1}}`+"\n", seq, seq, seq)
			if w.Flush() != nil {
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("record kept running on a full disk; stderr:\n%s", stderr.String())
	}
	x, ok := err.(*exec.ExitError)
	if !ok || x.ExitCode() != 1 {
		t.Errorf("record ended with %v, want exit 1", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "no space left on device; stopping") {
		t.Errorf("the failure is not the first thing said after the start:\n%s", stderr.String())
	}
	t.Logf("record stopped %v after the client started", time.Since(start).Round(time.Millisecond))
}

// Finding 8: report salvaged nothing from a damaged gzip. It now reports
// the events before the damage, warns, and exits 0.
func TestReportSalvagesADamagedGzip(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl.gz")
	runBin(t, bin, "demo", "--headless", "--steps", "400", "-o", path)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(full[len(full)*2/3:], strings.Repeat("\xa5", 32))
	if err := os.WriteFile(path, full, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code, _ := runExit(t, bin, "report", path)
	if code != 0 || !strings.Contains(stdout, "totals:") {
		t.Errorf("exit %d; stdout:\n%.300s", code, stdout)
	}
	if !strings.Contains(stderr, "the gzip stream is damaged") {
		t.Errorf("stderr lacks the damage warning:\n%.2000s", stderr)
	}
}

// Finding 10: `report /dev/zero` never returned. It now ends with one line.
func TestReportOfAnEndlessFirstLine(t *testing.T) {
	bin := binary(t)
	stdout, stderr, code, took := runExit(t, bin, "report", "/dev/zero")
	if code != 1 || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "not a vramscope recording") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if took > 10*time.Second {
		t.Errorf("report /dev/zero took %v", took)
	}
}

// Finding 11: the headless demo wrote NVML lines up to 11 s ahead of the
// hook's lines. Each NVML sample now follows the hook line it reflects:
// none is ahead of the newest hook line before it by more than one
// device interval.
func TestDemoNVMLLinesFollowTheHookLines(t *testing.T) {
	bin := binary(t)
	path := filepath.Join(t.TempDir(), "run.jsonl")
	runBin(t, bin, "demo", "--headless", "--steps", "200", "--ranks", "2", "-o", path)
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type clock struct{ mono, wall float64 }
	clocks := map[uint64]clock{}
	var newest time.Time
	var worst time.Duration
	samples := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Msg != nil && ev.Msg.Clock != nil:
			clocks[ev.Conn] = clock{ev.Msg.Clock.Mono, ev.Msg.Clock.Wall}
		case ev.Msg != nil:
			c := clocks[ev.Conn]
			at := time.Unix(0, int64((c.wall+ev.Msg.T-c.mono)*1e9))
			if at.After(newest) {
				newest = at
			}
		case ev.GPU != nil && newest.IsZero():
			t.Fatalf("an NVML sample (at %v) is recorded before any hook line", ev.GPU.At)
		case ev.GPU != nil:
			samples++
			if ahead := ev.GPU.At.Sub(newest); ahead > worst {
				worst = ahead
			}
		}
	}
	if samples < 100 {
		t.Fatalf("only %d NVML samples recorded", samples)
	}
	t.Logf("%d NVML samples; the furthest ahead of the hook lines before it: %v", samples, worst)
	if worst > 100*time.Millisecond {
		t.Errorf("an NVML sample is recorded %v ahead of the hook lines before it", worst)
	}
}

// Finding 1: the live view's --record kept showing ● REC on a full disk,
// printed nothing and exited 0. On a real 64 KiB filesystem the header now
// trades ● REC for the error, and quitting exits 1 with it.
func TestLiveRecordOnAFullDisk(t *testing.T) {
	dir := tinyfs.Mount(t, 64<<10)
	tm := newTmux(t)
	bin := binary(t)
	sockDir, err := os.MkdirTemp("", "vs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "d", "s.sock")
	rec := filepath.Join(dir, "live.jsonl")
	tm.run("new-session", "-d", "-s", "main", "-x", "200", "-y", "40", "sh", "-c",
		"'"+bin+"' --record '"+rec+"' --socket '"+sock+"' 2>&1; echo EXIT=$?; sleep 60")
	tm.waitFor(10*time.Second, "● REC "+rec)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, `{"v":1,"type":"hello","seq":0,"t":1.5,"session":"full","pid":42,"clock":{"mono":1.5,"wall":1763794800.25}}`+"\n")
	for seq := 1; seq < 5000; seq++ { // about 600 KB: ten times the disk
		fmt.Fprintf(w, `{"v":1,"type":"sample","seq":%d,"t":%d.5,"mem":{"allocated":%d,"max_allocated":1,"reserved":1,"max_reserved":1}}`+"\n", seq, seq, seq)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	scr := tm.waitFor(10*time.Second, "no space left on device")
	if strings.Contains(scr, "● REC") {
		t.Errorf("● REC still shown after the recording stopped:\n%s", scr)
	}
	tm.run("send-keys", "-t", "main", "q")
	scr = tm.waitFor(5*time.Second, "EXIT=")
	if !strings.Contains(scr, "EXIT=1") || !strings.Contains(scr, "vramscope: recording to "+rec+" stopped") {
		t.Errorf("after quitting:\n%s", scr)
	}
}
