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

// Issue 24 item 9: a recording with no memory data (a CPU run) drew an
// empty chart and exited 0. The command fails with one line and writes no
// file.
func TestPlotWithoutMemoryDataExitsNonZero(t *testing.T) {
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "cpu.svg")
	msg, err := exec.Command(bin, "plot", "testdata/recordings/cpu_torch113.jsonl.gz", "-o", out).CombinedOutput()
	if err == nil {
		t.Fatalf("plot of a run with no memory data succeeded:\n%s", msg)
	}
	if s := strings.TrimSpace(string(msg)); strings.Count(s, "\n") != 0 || !strings.Contains(s, "no memory data") {
		t.Errorf("want one line saying there is no memory data, got:\n%s", msg)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}

// Issue 24 item 5: `vramscope --socket PATH` with nothing set on the
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

// Issue 24 item 4: `vramscope run` hid the script's output in a log that
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
	tm.waitFor(5*time.Second, "host memory (RSS)") // the CPU run's main view (its RSS diagnosis)
	tm.run("send-keys", "-t", "main", "q")
	tm.waitFor(30*time.Second, "the command's output is in train.log", "EXIT=")
}

// Issue 24 item 3: r pressed minutes into the demo gave a recording whose
// replay played those minutes as an empty screen, and whose report gave
// 153 s for 12 s of data. Here r is pressed 6 s in, for about 2 s: the
// report spans the recorded stretch and says it started mid-session.
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
	if secs > 5 {
		t.Errorf("the report spans %.2f s for about 2 s recorded (the session before r counted)", secs)
	}
}
