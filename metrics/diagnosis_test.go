package metrics_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vramscope/vramscope/demo"
	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// putGenerated puts a generated rank's messages into the exporter's queue
// at their hook times.
func putGenerated(q *feed.Feed, conn uint64, msgs []ipc.Message) {
	c := msgs[0].Clock
	for i := range msgs {
		sec, frac := math.Modf(c.Wall + (msgs[i].T - c.Mono))
		at := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
		q.Put(session.Event{At: at, Conn: conn, Msg: &msgs[i]})
	}
}

// TestJobIdentityAndDiagnosisAsMetrics feeds two ranks of one Slurm job,
// one steady and one leaking 12 MiB a step, and reads what a dashboard
// and an alert rule need: the job as a label on every series, the info
// metric with dcgm-exporter's UUID and Hostname, the pattern, the leak's
// rate and onset, the device total, the headroom and the exact need.
func TestJobIdentityAndDiagnosisAsMetrics(t *testing.T) {
	job := &ipc.Job{ID: "81234", Source: ipc.JobSlurm, Step: "0", Node: "gpu-node-1"}
	steady, _ := demo.Lookup("steady")
	leak, _ := demo.Lookup("leak")
	q, e := newExporter()
	putGenerated(q, 1, demo.Generate(steady, demo.Config{Steps: 30, Rank: 2, WorldSize: 8, HostName: "gpu-node-1", Job: job}))
	putGenerated(q, 2, demo.Generate(leak, demo.Config{Steps: 30, Rank: 3, WorldSize: 8, HostName: "gpu-node-1", Job: job}))
	putGenerated(q, 3, demo.Generate(steady, demo.Config{Steps: 4, Rank: 4, WorldSize: 8, HostName: "train-1",
		Job: &ipc.Job{ID: "pretrain", Source: ipc.JobExplicit, Node: "gke-a3-7", Pod: "train-1", Namespace: "ml"}}))
	fams := scrape(t, e.Handler())
	r2 := map[string]string{"rank": "2", "job_id": "81234", "host": "gpu-node-1"}
	r3 := map[string]string{"rank": "3", "job_id": "81234"}

	info := map[string]string{"rank": "3", "job_id": "81234", "job_source": "slurm", "job_step": "0",
		"node": "gpu-node-1", "UUID": demo.DeviceUUID, "Hostname": "gpu-node-1", "pod": ""}
	if v := value(t, fams, "vramscope_process_info", info); v != 1 {
		t.Errorf("process_info = %v", v)
	}
	pod := map[string]string{"rank": "4", "pod": "train-1", "namespace": "ml", "node": "gke-a3-7", "Hostname": "gke-a3-7", "host": "train-1", "job_id": "pretrain"}
	if v := value(t, fams, "vramscope_process_info", pod); v != 1 {
		t.Errorf("a pod's process_info = %v: Hostname must be its node, as dcgm-exporter's", v)
	}
	if v := value(t, fams, "vramscope_peak_allocated_bytes", r2); v <= 0 {
		t.Errorf("the job_id label is missing from the memory series: %v", v)
	}
	if v := value(t, fams, "vramscope_pattern_info", map[string]string{"rank": "2", "pattern": "steady"}); v != 1 {
		t.Errorf("rank 2 pattern_info{steady} = %v", v)
	}
	if v := value(t, fams, "vramscope_pattern_info", map[string]string{"rank": "3", "pattern": "growth"}); v != 1 {
		t.Errorf("rank 3 pattern_info{growth} = %v", v)
	}
	leakRate := map[string]string{"rank": "3", "kind": "leak"}
	if v := value(t, fams, "vramscope_growth_bytes_per_step", leakRate); v != float64(demo.LeakPerStep) {
		t.Errorf("leak rate %v, want %d", v, demo.LeakPerStep)
	}
	if v := value(t, fams, "vramscope_held_growth_bytes_per_step", leakRate); v != float64(demo.LeakPerStep) {
		t.Errorf("held growth %v, want %d", v, demo.LeakPerStep)
	}
	if v := value(t, fams, "vramscope_growth_onset_step", leakRate); v < 0 || v > 2 {
		t.Errorf("leak onset at step %v, want it from the start", v)
	}
	if f := fams["vramscope_growth_bytes_per_step"]; len(f.Metric) != 1 {
		t.Errorf("%d growth series, want rank 3's only", len(f.Metric))
	}
	// Rank 2's newest step was read once and repeats step 2: its phases
	// are step 2's, labelled inferred, as the report's "same phases as
	// step 2".
	phases := 0
	for _, m := range fams["vramscope_phase_peak_allocated_bytes"].GetMetric() {
		if labelOf(m, "rank") == "2" {
			phases++
			if labelOf(m, "peak") != "inferred" || labelOf(m, "phase") == "backward" && m.GetGauge().GetValue() != 4572839936 {
				t.Errorf("rank 2 %s: %v %s", labelOf(m, "phase"), m.GetGauge().GetValue(), labelOf(m, "peak"))
			}
		}
	}
	if phases != 5 {
		t.Errorf("rank 2's newest step has %d phase peaks, want step 2's five", phases)
	}
	if v := value(t, fams, "vramscope_device_total_bytes", r3); v != float64(demo.DeviceTotal) {
		t.Errorf("device total %v", v)
	}
	if v := value(t, fams, "vramscope_headroom_bytes", r2); v <= 0 || v >= float64(demo.DeviceTotal) {
		t.Errorf("headroom %v", v)
	}
	if v := value(t, fams, "vramscope_need_allocated_bytes", map[string]string{"rank": "2", "peak": "exact"}); v != 4572839936 {
		t.Errorf("rank 2 needs %v, want its steady peak 4572839936 (docs/demo.md's 4329 MiB plus 2 × 16 MiB)", v)
	}
	if fams["vramscope_need_allocated_bound_bytes"] != nil {
		t.Error("exact peaks served as a bound")
	}
	if v := value(t, fams, "vramscope_need_steady", r2); v != 1 {
		t.Errorf("rank 2 need_steady = %v", v)
	}
}

// TestBoundNeedIsNeverServedAsANeed reads two real H100 recordings: s001's
// need is inferred from an exact step and served as a value with peak
// "inferred"; in clients.jsonl.gz (21 processes, older hooks) a need known
// only as a lower bound is served as vramscope_need_allocated_bound_bytes
// and never as vramscope_need_allocated_bytes.
func TestBoundNeedIsNeverServedAsANeed(t *testing.T) {
	load := func(name string) *metrics.Exporter {
		q, e := newExporter()
		r, err := record.Open("../testdata/h100/" + name)
		if err != nil {
			t.Fatal(err)
		}
		feedRecording(t, q, r, nil)
		r.Close()
		return e
	}
	fams := scrape(t, load("s001.jsonl.gz").Handler())
	if v := value(t, fams, "vramscope_need_allocated_bytes", map[string]string{"peak": "inferred", "job_id": ""}); v != 4518008832 {
		t.Errorf("s001 needs %v, want 4518008832 (its report's need)", v)
	}
	fams = scrape(t, load("clients.jsonl.gz").Handler())
	bounds := map[string]bool{}
	for _, m := range fams["vramscope_need_allocated_bound_bytes"].GetMetric() {
		bounds[labelOf(m, "session")] = true
	}
	if len(bounds) < 10 {
		t.Fatalf("%d processes with a bound need, want most of the 21", len(bounds))
	}
	for _, m := range fams["vramscope_need_allocated_bytes"].GetMetric() {
		if bounds[labelOf(m, "session")] || labelOf(m, "peak") == "bound" {
			t.Errorf("session %s: a bound served as a need", labelOf(m, "session"))
		}
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestCatalogNamesEveryServedFamily: every family a scrape carries (beyond
// the Go runtime's) is in metrics.Catalog with the same labels, so tests
// of the shipped dashboard can check queries against the catalogue.
func TestCatalogNamesEveryServedFamily(t *testing.T) {
	cat := map[string][]string{}
	for _, f := range metrics.Catalog() {
		cat[f.Name] = f.Labels
	}
	leak, _ := demo.Lookup("leak")
	q, e := newExporter()
	putGenerated(q, 1, demo.Generate(leak, demo.Config{Steps: 30, Rank: 1, WorldSize: 2, Job: &ipc.Job{ID: "j"}}))
	n := 0
	for name, f := range scrape(t, e.Handler()) {
		if len(name) < 10 || name[:10] != "vramscope_" {
			continue
		}
		labels, ok := cat[name]
		if !ok {
			t.Errorf("%s is served but not in the catalogue", name)
			continue
		}
		n++
		for _, m := range f.Metric {
			if len(m.Label) != len(labels) {
				t.Errorf("%s: %d labels served, catalogue has %v", name, len(m.Label), labels)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d families served", n)
	}
}

// TestLevelChangeAsMetrics: a run whose every phase the hook read, steady
// at a 2000 MiB peak over 1900 MiB held, that keeps a 1536 MiB buffer
// across steps from step 40 (the diagnosis's "a new buffer" level change):
// one level change, at step 40, from 3900 to 5436 MiB; none in a steady
// run.
func TestLevelChangeAsMetrics(t *testing.T) {
	mib := func(n int64) int64 { return n << 20 }
	run := func(conn uint64, rise int) []ipc.Message {
		world, rank := 2, int(conn)-1
		msgs := []ipc.Message{{V: 1, Type: ipc.TypeHello, Session: fmt.Sprintf("lv%d", conn), PID: 100 + int(conn), Host: "node-0",
			Rank: &rank, WorldSize: &world, CUDA: &ipc.CUDADevice{UUID: "GPU-1", Name: "H100", Total: mib(81559)},
			Clock: &ipc.Clock{Mono: 1000, Wall: 1763794800}, Hook: &ipc.HookConfig{Version: "0.2.0", SampleHz: 50, ExactPeaks: true},
			MemSource: &ipc.MemSource{Kind: ipc.SourceCUDA, Peaks: ipc.PeaksExact}, T: 1000}}
		t := 1000.0
		for i := 0; i < 80; i++ {
			held := int64(1900)
			if rise >= 0 && i >= rise {
				held += 1536
			}
			for _, e := range []struct {
				name      string
				end, peak int64
			}{{"zero_grad", held, held}, {"forward", held + 1000, held + 1000}, {"loss", held + 1000, held + 1000}, {"backward", held, held + 2000}, {"step", held, held}} {
				t += 0.01
				msgs = append(msgs, ipc.Message{V: 1, Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeBegin, T: t})
				t += 0.01
				msgs = append(msgs, ipc.Message{V: 1, Type: ipc.TypePhase, Name: e.name, Step: i, Edge: ipc.EdgeEnd, T: t,
					Mem: &ipc.Mem{Allocated: mib(e.end), MaxAllocated: mib(e.peak), Reserved: mib(9000), MaxReserved: mib(9000)}})
			}
		}
		for i := range msgs {
			msgs[i].Seq = uint64(i)
		}
		return msgs
	}
	q, e := newExporter()
	putGenerated(q, 1, run(1, 40))
	putGenerated(q, 2, run(2, -1))
	fams := scrape(t, e.Handler())
	r0, r1 := map[string]string{"rank": "0"}, map[string]string{"rank": "1"}
	if v := value(t, fams, "vramscope_level_changes", r0); v != 1 {
		t.Fatalf("rank 0: %v level changes, want 1", v)
	}
	if v := value(t, fams, "vramscope_level_change_step", r0); v != 40 {
		t.Errorf("level change at step %v, want 40", v)
	}
	if f, to := value(t, fams, "vramscope_level_change_peak_from_bytes", r0), value(t, fams, "vramscope_level_change_peak_to_bytes", r0); f != float64(mib(3900)) || to != float64(mib(5436)) {
		t.Errorf("level %v → %v, want 3900 → 5436 MiB", f/float64(mib(1)), to/float64(mib(1)))
	}
	if v := value(t, fams, "vramscope_level_changes", r1); v != 0 {
		t.Errorf("the steady rank: %v level changes", v)
	}
}
