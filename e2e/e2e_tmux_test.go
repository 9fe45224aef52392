package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests drive the real binary in a real terminal (tmux), as a user
// would: start the demo, read the screen, press keys, resize, quit.

// binary returns the vramscope binary under test: $VRAMSCOPE_BIN (set by
// make), else one built for this test.
func binary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("VRAMSCOPE_BIN"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "vramscope")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

type tmux struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("VRAMSCOPE_REQUIRE_TMUX") == "1" {
			t.Fatal("tmux is required (VRAMSCOPE_REQUIRE_TMUX=1) but not installed")
		}
		t.Skip("!!! tmux not installed: end-to-end terminal tests SKIPPED !!!")
	}
	// The process id keeps two runs of the suite on one machine (or one a
	// killed run left behind) on servers of their own.
	tm := &tmux{t: t, socket: fmt.Sprintf("vs-e2e-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid())}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tmux) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (tm *tmux) screen() string { return tm.run("capture-pane", "-p", "-t", "main") }

// waitFor polls the screen until every want string is on it.
func (tm *tmux) waitFor(d time.Duration, want ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(d)
	var scr string
	for time.Now().Before(deadline) {
		scr = tm.screen()
		missing := false
		for _, w := range want {
			if !strings.Contains(scr, w) {
				missing = true
				break
			}
		}
		if !missing {
			return scr
		}
		time.Sleep(100 * time.Millisecond)
	}
	tm.t.Fatalf("after %v the screen lacks one of %q:\n%s", d, want, scr)
	return ""
}

func TestTmuxDemo(t *testing.T) {
	tm := newTmux(t)
	bin := binary(t)
	dir := t.TempDir()
	// A shell runs the demo, then reports its exit and the terminal mode,
	// so we can check the terminal was restored.
	script := "cd '" + dir + "' && '" + bin + "' demo --speed 4 --debug debug.log; " +
		"echo EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo; sleep 60"
	tm.run("new-session", "-d", "-s", "main", "-x", "160", "-y", "48", "sh", "-c", script)

	// The chart legend, the phase labels, the steps table and the warmup
	// line (the demo reaches its steady state at step 2).
	tm.waitFor(20*time.Second, "allocated", "reserved", "forward", "backward", "zero_grad", "step", "+847 MiB over step 0", "steady since step 2")

	// Each key waits for its effect: keys sent before the program has read
	// the previous one can reach it as one message ("??r"), which matches
	// no binding. The footer says "quit" and "zoom" too: the help page is
	// known by its "Keys" heading.
	tm.run("send-keys", "-t", "main", "?")
	tm.waitFor(5*time.Second, "Keys", "quit", "zoom")
	tm.run("send-keys", "-t", "main", "?")
	for deadline := time.Now().Add(5 * time.Second); strings.Contains(tm.screen(), "Keys") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	tm.waitFor(5*time.Second, "Memory (GiB) ·")

	// Record a stretch of the running session with r … r.
	tm.run("send-keys", "-t", "main", "r")
	tm.waitFor(5*time.Second, "● REC vramscope-")
	time.Sleep(1500 * time.Millisecond)
	tm.run("send-keys", "-t", "main", "r")
	deadline := time.Now().Add(5 * time.Second)
	for strings.Contains(tm.screen(), "● REC") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}

	tm.run("resize-window", "-t", "main", "-x", "80", "-y", "24")
	scr := tm.waitFor(5*time.Second, "alloc", "over step 0")
	for i, line := range strings.Split(strings.TrimRight(scr, "\n"), "\n") {
		if w := len([]rune(line)); w > 80 {
			t.Errorf("line %d is %d columns wide after resizing to 80:\n%s", i, w, line)
		}
	}

	start := time.Now()
	tm.run("send-keys", "-t", "main", "q")
	scr = tm.waitFor(3*time.Second, "EXIT=0")
	if took := time.Since(start); took > time.Second+200*time.Millisecond {
		t.Errorf("quitting took %v, want about a second at most", took)
	}
	// The shell prints stty's verdict just after EXIT: give it a moment
	// (reading the screen at once raced it, failing 2 runs in 6).
	for wait := time.Now().Add(2 * time.Second); !strings.Contains(scr, "icanon echo") && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
		scr = tm.screen()
	}
	if !strings.Contains(scr, "icanon echo") {
		t.Errorf("terminal not restored to canonical mode with echo:\n%s", scr)
	}

	// The stretch recorded mid-session stands on its own.
	recs, _ := filepath.Glob(filepath.Join(dir, "vramscope-*.jsonl.gz"))
	if len(recs) != 1 {
		t.Fatalf("recordings made with r: %v", recs)
	}
	out, _ := runBin(t, bin, "report", recs[0])
	if !strings.Contains(out, "1 process") || strings.Contains(out, "bad message") || !strings.Contains(out, "lost 0") {
		t.Errorf("report of the mid-session recording:\n%s", out)
	}
}

// A recording of the demo (simulated NVML included) replays with the same
// views: the NVML line, the steps and the diagnosis.
func TestTmuxReplay(t *testing.T) {
	tm := newTmux(t)
	bin := binary(t)
	rec := filepath.Join(t.TempDir(), "demo.jsonl.gz")
	runBin(t, bin, "demo", "--headless", "--steps", "12", "-o", rec)
	tm.run("new-session", "-d", "-s", "main", "-x", "160", "-y", "48", "sh", "-c",
		"'"+bin+"' replay '"+rec+"'; echo EXIT=$?; sleep 60")
	tm.waitFor(10*time.Second, "replay", "NVML process", "allocated")
	tm.run("send-keys", "-t", "main", "s", "s", "s") // 1× → 4× → 16× → max
	scr := tm.waitFor(20*time.Second, "■ ended", "(3482→4329 MiB", "steady since step 2")
	if !strings.Contains(scr, "  11 ") {
		t.Errorf("the steps table does not reach step 11:\n%s", scr)
	}
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(3*time.Second, "EXIT=0")
}

// checkWidth fails when a line of the screen is wider than w columns.
func checkWidth(t *testing.T, scr string, w int) {
	t.Helper()
	for i, line := range strings.Split(strings.TrimRight(scr, "\n"), "\n") {
		if n := len([]rune(line)); n > w {
			t.Errorf("line %d is %d columns wide, more than %d:\n%s", i, n, w, line)
		}
	}
}

// On an 80×24 terminal every panel is a key away: the anatomy (a), the
// whole diagnosis (d, scrolled with end), the help with its glossary (?);
// three ranks are listed in rank order with an all-ranks line, and once
// the demo's ranks have said goodbye the header says exited.
func TestTmux80x24Panels(t *testing.T) {
	tm := newTmux(t)
	bin := binary(t)
	tm.run("new-session", "-d", "-s", "main", "-x", "80", "-y", "24", "sh", "-c",
		"'"+bin+"' demo --ranks 3 --steps 12 --speed 4; echo EXIT=$?; sleep 60")
	scr := tm.waitFor(30*time.Second, "rank 0 · pid", "(1/3)", "ranks peak MiB: [0 ", " · 1 ", " · 2 ", "spread")
	if strings.Contains(scr, "Memory anatomy") {
		t.Fatalf("80×24 shows the anatomy beside the chart: the test is moot\n%s", scr)
	}
	checkWidth(t, scr, 80)

	keys := []struct {
		key  string
		want []string
	}{
		{"a", []string{"Memory anatomy", "W weights", "C allocator cache", "X other processes"}},
		{"Escape", []string{"Memory (GiB) ·", "zero_grad"}},
		{"d", []string{"Diagnosis", "session peak", "largest part"}},
		{"End", []string{"All processes", "rank 2 · pid", "spread:"}},
		{"?", []string{"Keys", "diagnosis", "anatomy", "Glossary"}},
		// The page's height follows the banner's (one row or two at 80
		// columns, as the diagnosis changes): go to the glossary's end
		// rather than count pages.
		{"End", []string{"N         non-PyTorch", "■ exited (said goodbye)", "the largest minus the smallest peak"}},
		{"?", []string{"Memory (GiB) ·"}},
	}
	for _, k := range keys {
		tm.run("send-keys", "-t", "main", k.key)
		checkWidth(t, tm.waitFor(5*time.Second, k.want...), 80)
	}
	// 12 steps at 4× take about 1.2 s: the ranks have said goodbye.
	scr = tm.waitFor(30*time.Second, "■ exited", "rank 0 · pid", "[0 ")
	if strings.Contains(firstLine(scr), "disconnected") {
		t.Errorf("after goodbye the header says disconnected:\n%s", scr)
	}
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(5*time.Second, "EXIT=0")
}

// A real CPU run replayed at 80×24 shows its timings, not a table of
// dashes.
func TestTmuxCPURun(t *testing.T) {
	tm := newTmux(t)
	bin := binary(t)
	tm.run("new-session", "-d", "-s", "main", "-x", "80", "-y", "24", "sh", "-c",
		"'"+bin+"' replay testdata/recordings/cpu_torch113.jsonl.gz; echo EXIT=$?; sleep 60")
	// The run lasted 0.4 s: it has ended by the first look.
	scr := tm.waitFor(20*time.Second, "■ ended", "■ exited", "Timings · CPU run", "forward", "  39 ")
	if strings.Contains(scr, "–") || strings.Contains(scr, "Memory (GiB) ·") {
		t.Errorf("a CPU run shows memory columns:\n%s", scr)
	}
	checkWidth(t, scr, 80)
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(5*time.Second, "EXIT=0")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// `vramscope --socket PATH` with nothing set on the
// training side: the waiting screen names the line to add there.
func TestTmuxWaitingScreenNamesTheTrainingSideSocket(t *testing.T) {
	tm := newTmux(t)
	bin := binary(t)
	dir, err := os.MkdirTemp("", "vs-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "my.sock")
	tm.run("new-session", "-d", "-s", "main", "-x", "80", "-y", "24", "sh", "-c",
		"env -u VRAMSCOPE_SOCKET '"+bin+"' --socket '"+sock+"'; sleep 30")
	tm.waitFor(10*time.Second, "Waiting for a training process", "export VRAMSCOPE_SOCKET="+sock)
	tm.run("send-keys", "-t", "main", "q")
}

// `vramscope run` hid the script's output in a log that
// nothing on screen named. On a real CPU run (torch), the header names the
// log and o shows its last lines, the script's last print among them.
func TestTmuxRunShowsWhereTheOutputGoes(t *testing.T) {
	bin, py, script := binary(t), torchPython(t), trainScript(t)
	tm := newTmux(t)
	dir := t.TempDir()
	sh := "cd '" + dir + "' && '" + bin + "' run --log train.log -- '" + py + "' '" + script + "' --steps 6; echo EXIT=$?; sleep 60"
	tm.run("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "sh", "-c", sh)
	tm.waitFor(90*time.Second, "output → train.log", "exited")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dir, "train.log")); strings.Contains(string(b), "trained 6 steps") {
			break
		}
	}
	tm.run("send-keys", "-t", "main", "o")
	tm.waitFor(10*time.Second, "trained 6 steps in pid")
	tm.run("send-keys", "-t", "main", "o")
	tm.waitFor(5*time.Second, "Memory (", "host memory (RSS)") // the CPU run's main view: its chart and RSS diagnosis
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(30*time.Second, "the command's output is in train.log", "EXIT=")
}

// r pressed minutes into the demo gave a recording whose replay played
// those minutes as an empty screen, then one that held only
// the seconds after the key, without the warmup or an anatomy. Here r is
// pressed 6 s in, for about 2 s: the recording opens with the history the
// monitor holds, so its report spans the session from its start, has the
// warmup and the anatomy, and says it started mid-session.
func TestTmuxRecordingStartedWithRStartsWithItsData(t *testing.T) {
	tm := newTmux(t)
	bin := binary(t)
	dir := t.TempDir()
	tm.run("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "sh", "-c",
		"cd '"+dir+"' && '"+bin+"' demo; echo EXIT=$?; sleep 30")
	tm.waitFor(20*time.Second, "steady since step 2")
	time.Sleep(4 * time.Second)
	tm.run("send-keys", "-t", "main", "r")
	tm.waitFor(5*time.Second, "● REC vramscope-")
	time.Sleep(2 * time.Second)
	tm.run("send-keys", "-t", "main", "r")
	for deadline := time.Now().Add(5 * time.Second); strings.Contains(tm.screen(), "● REC") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(10*time.Second, "EXIT=0")
	recs, _ := filepath.Glob(filepath.Join(dir, "vramscope-*.jsonl.gz"))
	if len(recs) != 1 {
		t.Fatalf("recordings: %v", recs)
	}
	out, _ := runBin(t, bin, "report", recs[0])
	first := strings.SplitN(out, "\n", 3)
	if len(first) < 2 || !strings.HasPrefix(first[1], "recording mid-session: started at ") {
		t.Errorf("the report does not say the recording started mid-session:\n%s", out)
	}
	var secs float64
	if i := strings.LastIndex(first[0], " · "); i < 0 || !strings.HasSuffix(first[0], " s") {
		t.Fatalf("report's first line: %q", first[0])
	} else if _, err := fmt.Sscanf(first[0][i+len(" · "):], "%f s", &secs); err != nil {
		t.Fatalf("report's first line %q: %v", first[0], err)
	}
	if secs < 6 || secs > 20 {
		t.Errorf("the report spans %.2f s, want the session from its start to about 2 s after r", secs)
	}
	for _, want := range []string{"step 1 +847 MiB over step 0", "measured at step 2", "lost 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report of the recording lacks %q:\n%s", want, out)
		}
	}
}
