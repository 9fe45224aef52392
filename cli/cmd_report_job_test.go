package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/session"
)

// writeNode records the ranks of one node of a job, each rank's messages
// at their hook times on its own connection, as `record` would.
func writeNode(t *testing.T, path, host string, job *ipc.Job, world int, ranks map[int]string, steps int) {
	t.Helper()
	w, err := record.Create(path, record.Header{Tool: "test", Host: host})
	if err != nil {
		t.Fatal(err)
	}
	var evs []session.Event
	for r, scenario := range ranks {
		sc, err := demo.Lookup(scenario)
		if err != nil {
			t.Fatal(err)
		}
		msgs := demo.Generate(sc, demo.Config{Steps: steps, Rank: r, WorldSize: world, HostName: host, Job: job})
		c := msgs[0].Clock
		for i := range msgs {
			sec, frac := math.Modf(c.Wall + (msgs[i].T - c.Mono))
			at := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
			raw, _ := json.Marshal(&msgs[i])
			msgs[i].Raw = raw
			evs = append(evs, session.Event{At: at, Conn: uint64(r + 1), Msg: &msgs[i]})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At.Before(evs[j].At) })
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestJobReportOfManyRecordings generates a 16-rank job on 4 nodes (4
// ranks a recording), every rank steady at the demo's steady peak plus 16
// MiB a rank except rank 13, which leaks 12 MiB a step, and reports it
// from the four files in a shuffled order and from their directory: both
// give the same view, with every rank in order, its need, steady peak and
// held memory as docs/demo.md gives them, rank 13 the one leaking and the
// largest, the imbalance its need against the median, in backward.
func TestJobReportOfManyRecordings(t *testing.T) {
	dir := t.TempDir()
	const steps, world = 30, 16
	job := func(n int) *ipc.Job {
		return &ipc.Job{ID: "81234", Source: ipc.JobSlurm, Step: "0", Node: fmt.Sprintf("node-%d", n)}
	}
	var paths []string
	for n := 0; n < 4; n++ {
		ranks := map[int]string{}
		for r := 4 * n; r < 4*n+4; r++ {
			ranks[r] = "steady"
		}
		if n == 3 {
			ranks[13] = "leak"
		}
		p := filepath.Join(dir, fmt.Sprintf("node-%d.jsonl.gz", n))
		writeNode(t, p, fmt.Sprintf("node-%d", n), job(n), world, ranks, steps)
		paths = append(paths, p)
	}
	rand.New(rand.NewSource(1)).Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })

	var out, errOut bytes.Buffer
	if err := runJobReport(paths, true, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var v report.JobView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Schema != report.JobSchema || len(v.Recordings) != 4 || len(v.Jobs) != 1 || v.Jobs[0] != "81234" || len(v.Ranks) != world {
		t.Fatalf("schema %q, %d recordings, jobs %v, %d ranks", v.Schema, len(v.Recordings), v.Jobs, len(v.Ranks))
	}
	mib := func(n int64) session.Bytes { return session.Bytes(n * session.MiB) }
	var needs []session.Bytes
	for i, r := range v.Ranks {
		if r.Rank == nil || *r.Rank != i || r.Host != fmt.Sprintf("node-%d", i/4) || r.Job == nil || r.Job.Node != r.Host {
			t.Fatalf("row %d: rank %v on %s, job %+v", i, r.Rank, r.Host, r.Job)
		}
		needs = append(needs, r.Need)
		if r.NeedKnown != session.Exact || r.PeakPhase != "backward" {
			t.Errorf("rank %d: need %s, peak in %q", i, r.NeedKnown, r.PeakPhase)
		}
		if i == 13 {
			if r.Pattern != "growth" || r.Growth == nil || r.Growth.Kind != "leak" || r.Growth.PerStep != session.Bytes(demo.LeakPerStep) ||
				r.SteadyPeak.Known() || r.NeedSteady {
				t.Errorf("rank 13: %+v %+v", r, r.Growth)
			}
			continue
		}
		want, held := mib(4329+16*int64(i)), mib(1581+16*int64(i))
		if r.Pattern != "steady" || r.Need != want || r.SteadyPeak != want || !r.NeedSteady || r.Held != held || r.Growth != nil {
			t.Errorf("rank %d: pattern %s, need %d, steady %d, held %d, want %d and %d held", i, r.Pattern, r.Need, r.SteadyPeak, r.Held, want, held)
		}
	}
	if len(v.Leaking) != 1 || *v.Leaking[0].Rank != 13 || v.Leaking[0].Host != "node-3" || v.Leaking[0].Growth.HeldPerStep != session.Bytes(demo.LeakPerStep) {
		t.Errorf("leaking %+v, want rank 13 on node-3", v.Leaking)
	}
	sort.Slice(needs, func(i, j int) bool { return needs[i] < needs[j] })
	median := (needs[7] + needs[8]) / 2
	im := v.Imbalance
	if im == nil || *im.Largest.Rank != 13 || im.Need != needs[15] || im.Median != median || im.Ranks != world || im.Phase != "backward" ||
		math.Abs(im.Ratio-float64(needs[15])/float64(median)) > 1e-12 {
		t.Fatalf("imbalance %+v, want rank 13's %d against the median %d", im, needs[15], median)
	}

	// The directory gives the same view, its files in name order.
	var fromDir bytes.Buffer
	all, err := recordingPaths([]string{dir})
	if err != nil || len(all) != 4 {
		t.Fatalf("recordingPaths: %v %v", all, err)
	}
	if err := runJobReport(all, true, &fromDir, &errOut); err != nil {
		t.Fatal(err)
	}
	var w report.JobView
	json.Unmarshal(fromDir.Bytes(), &w)
	a, _ := json.Marshal([]any{v.Ranks, v.Imbalance, v.Leaking})
	b, _ := json.Marshal([]any{w.Ranks, w.Imbalance, w.Leaking})
	if !bytes.Equal(a, b) {
		t.Fatalf("the order of the files changed the view:\n%s\n%s", a, b)
	}

	var text bytes.Buffer
	if err := runJobReport(paths, false, &text, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"job 81234 · 4 recordings · 16 ranks", "imbalance: rank 13 on node-3", "leaking: rank 13 on node-3", "grows 12 MiB a step"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestJobReportEscapesWhatHooksSent: a host name with terminal control
// bytes reaches the text view escaped (a job field with one is refused by
// ipc already).
func TestJobReportEscapesWhatHooksSent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "n.jsonl")
	writeNode(t, p, "evil\x1b[2Jhost", &ipc.Job{ID: "81234"}, 2, map[int]string{0: "steady", 1: "steady"}, 6)
	var text, errOut bytes.Buffer
	if err := runJobReport([]string{p}, false, &text, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "\x1b") || !strings.Contains(text.String(), `evil\x1b[2Jhost`) {
		t.Errorf("unescaped:\n%q", text.String())
	}
}

// TestRecordingPathsOfAnEmptyDirectory says so instead of a blank report.
func TestRecordingPathsOfAnEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	if _, err := recordingPaths([]string{dir}); err == nil || !strings.Contains(err.Error(), "no recordings") {
		t.Errorf("err %v", err)
	}
}

// writeJob writes a 8-rank job on 2 nodes into dir, every rank steady
// except leak (none when -1), the nodes' files in dir.
func writeJob(t *testing.T, dir string, leak int) {
	t.Helper()
	for n := 0; n < 2; n++ {
		ranks := map[int]string{}
		for r := 4 * n; r < 4*n+4; r++ {
			ranks[r] = "steady"
			if r == leak {
				ranks[r] = "leak"
			}
		}
		host := fmt.Sprintf("node-%d", n)
		writeNode(t, filepath.Join(dir, host+".jsonl"), host, &ipc.Job{ID: filepath.Base(dir), Node: host}, 8, ranks, 20)
	}
}

// TestDiffComparesTwoJobsRankByRank: two directories, each a job's
// recordings, compare rank by rank: eight pairs in rank order, every one
// unchanged but rank 5, which leaked in the first job and not in the
// second: its steady state differs.
func TestDiffComparesTwoJobsRankByRank(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "before"), filepath.Join(t.TempDir(), "after")
	os.Mkdir(a, 0o700)
	os.Mkdir(b, 0o700)
	writeJob(t, a, 5)
	writeJob(t, b, -1)
	var out, errOut bytes.Buffer
	if err := runDiff(a, b, "", "", true, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res struct {
		Pairs []struct {
			A, B struct {
				Rank    *int   `json:"rank"`
				Pattern string `json:"pattern"`
			}
			Steady struct {
				Peak struct {
					Change *int64 `json:"change"`
				} `json:"peak"`
			} `json:"steady"`
		} `json:"pairs"`
		UnpairedA, UnpairedB int
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Pairs) != 8 {
		t.Fatalf("%d pairs, want 8:\n%s", len(res.Pairs), out.String())
	}
	for i, p := range res.Pairs {
		if *p.A.Rank != i || *p.B.Rank != i {
			t.Errorf("pair %d: ranks %d and %d", i, *p.A.Rank, *p.B.Rank)
		}
		change := p.Steady.Peak.Change
		if i == 5 {
			if p.A.Pattern != "growth" || p.B.Pattern != "steady" || change == nil || *change != -20*demo.LeakPerStep {
				t.Errorf("rank 5: %s → %s, peak change %v, want −20 leaks", p.A.Pattern, p.B.Pattern, change)
			}
		} else if change == nil || *change != 0 || p.A.Pattern != "steady" {
			t.Errorf("rank %d changed: %v", i, change)
		}
	}
}

// TestReportNamesTheJob: the single report's process header names the job
// the hook read, escaped; a pod without a job id is named by its pod.
func TestReportNamesTheJob(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeNode(t, a, "node-1", &ipc.Job{ID: "81234", Source: ipc.JobSlurm, Step: "0", Node: "node-1"}, 2, map[int]string{1: "steady"}, 4)
	writeNode(t, b, "pod-host", &ipc.Job{Source: ipc.JobKubernetes, Pod: "nb-0", Namespace: "alice\u00e9", Node: "n1"}, 2, map[int]string{0: "steady"}, 4)
	for path, want := range map[string]string{a: "· job 81234 (slurm, step 0, node node-1) ·", b: "· job – (kubernetes, node n1, pod aliceé/nb-0) ·"} {
		var out, errOut bytes.Buffer
		if err := runReport(path, false, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s: no %q in\n%s", path, want, out.String())
		}
		out.Reset()
		runReport(path, true, &out, &errOut)
		if !strings.Contains(out.String(), `"job": {`) {
			t.Errorf("%s: the JSON has no job", path)
		}
	}
}

// TestReportKeepsEveryRankOfABigRecording: a recording read after the
// fact holds processes that are all gone; the live store's bound on gone
// processes (session.DefaultMaxGoneBytes) once dropped the first ranks of
// a node's recording from the report, silently. Eight ranks of 600 steps
// are all reported, and all compared by diff.
func TestReportKeepsEveryRankOfABigRecording(t *testing.T) {
	dir := t.TempDir()
	ranks := map[int]string{}
	for r := 0; r < 8; r++ {
		ranks[r] = "steady"
	}
	p := filepath.Join(dir, "node-0.jsonl")
	writeNode(t, p, "node-0", &ipc.Job{ID: "81234"}, 8, ranks, 600)
	var out, errOut bytes.Buffer
	if err := runJobReport([]string{p}, true, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var v report.JobView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Ranks) != 8 {
		t.Fatalf("%d ranks reported, want 8", len(v.Ranks))
	}
	out.Reset()
	if err := runDiff(p, p, "", "", true, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), `"common_steps"`); n != 8 {
		t.Errorf("diff paired %d ranks, want 8", n)
	}
}
