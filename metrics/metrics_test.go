package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/vramscope/vramscope/feed"
	"github.com/vramscope/vramscope/metrics"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

// newExporter is an exporter with its queue, a feed of its own, as
// --prometheus wires them.
func newExporter(opts ...metrics.Option) (*feed.Feed, *metrics.Exporter) {
	q := feed.New(feed.WithLimit(metrics.QueueLimit))
	return q, metrics.New(q, opts...)
}

// feedRecording puts the events of a recording into the exporter's queue,
// as the feed's tap does live, up to the first one stop accepts (nil: all).
func feedRecording(t testing.TB, q *feed.Feed, r *record.Reader, stop func(session.Event) bool) {
	t.Helper()
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		q.Put(ev)
		if stop != nil && stop(ev) {
			return
		}
	}
}

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
				continue next
			}
		}
		if g := m.Gauge; g != nil {
			return g.GetValue()
		}
		return m.Counter.GetValue()
	}
	t.Fatalf("no %s with %v", name, labels)
	return 0
}

// TestExporterServesS001 feeds the real H100 run s001 and reads /metrics
// with Prometheus's own text parser: the session peak is the run's
// max_memory_allocated (4518008832 B, s001_stat_cuda.json), the newest
// finished step is step 4 with its five phase peaks, the process is
// labelled as its hello says, and NVML sees the device and the process.
func TestExporterServesS001(t *testing.T) {
	q, e := newExporter(metrics.WithMonitorHost("vm"))
	r, err := record.Open("../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	proc := map[string]string{"host": "vm", "pid": "618", "rank": "", "device": "0", "uuid": "GPU-794fb573-dbc6-e71a-521b-d1ed3fe096cd"}
	// Mid-run, as a live scrape sees it: forward of step 3 has begun.
	feedRecording(t, q, r, func(ev session.Event) bool {
		m := ev.Msg
		return m != nil && m.Type == "phase" && m.Step == 3 && m.Name == "forward" && m.Edge == "begin"
	})
	fams := scrape(t, e.Handler())
	if v := value(t, fams, "vramscope_step", proc); v != 3 {
		t.Errorf("step %v, want 3", v)
	}
	if v := value(t, fams, "vramscope_last_step", proc); v != 2 {
		t.Errorf("mid-run last finished step %v, want 2 (step 3 is running)", v)
	}
	if v := value(t, fams, "vramscope_phase_info", map[string]string{"pid": "618", "phase": "forward"}); v != 1 {
		t.Errorf("phase_info{phase=forward} %v", v)
	}
	if v := value(t, fams, "vramscope_nvml_process_used_bytes", map[string]string{"pid": "618"}); v < 1<<30 {
		t.Errorf("NVML process used %v, want the training's GiBs", v)
	}
	// The optimizer step of step 3 has ended, step 4 has not begun: step 3
	// is finished.
	feedRecording(t, q, r, func(ev session.Event) bool {
		m := ev.Msg
		return m != nil && m.Type == "phase" && m.Step == 3 && m.Name == "step" && m.Edge == "end"
	})
	if v := value(t, scrape(t, e.Handler()), "vramscope_last_step", proc); v != 3 {
		t.Errorf("after step 3's optimizer step: last finished step %v, want 3", v)
	}
	// At the end of the run.
	feedRecording(t, q, r, nil)
	fams = scrape(t, e.Handler())
	if v := value(t, fams, "vramscope_peak_allocated_bytes", proc); v != 4518008832 {
		t.Errorf("peak allocated %v, want 4518008832", v)
	}
	if v := value(t, fams, "vramscope_peak_reserved_bytes", proc); v != 4932501504 {
		t.Errorf("peak reserved %v, want 4932501504", v)
	}
	// All six steps (0-5) finished: it used to say 4, the row before the
	// newest (98 after a 100-step run).
	if v := value(t, fams, "vramscope_last_step", proc); v != 5 {
		t.Errorf("last finished step %v, want 5", v)
	}
	if n := len(fams["vramscope_phase_peak_allocated_bytes"].GetMetric()); n != 5 {
		t.Errorf("%d phase peaks, want 5", n)
	}
	// Step 4 repeats step 1 to the byte: its peak is step 1's, inferred and
	// labelled so; its phase peaks below that high are labelled bounds.
	inferred := map[string]string{"pid": "618", "peak": "inferred"}
	if v := value(t, fams, "vramscope_step_peak_allocated_bytes", inferred); v != 4518008832 {
		t.Errorf("step peak %v, want step 1's 4518008832 (inferred)", v)
	}
	if v := value(t, fams, "vramscope_phase_peak_allocated_bytes", map[string]string{"phase": "forward", "peak": "bound"}); v <= 0 {
		t.Errorf("forward peak %v, want a labelled lower bound", v)
	}
	if v := value(t, fams, "vramscope_step_held_bytes", proc); v != 1730501120 {
		t.Errorf("held %v, want 1730501120 (allocated after optimizer.step(), s001_stat_cuda.json)", v)
	}
	if v := value(t, fams, "vramscope_nvml_device_total_bytes", nil); v < 80e9 {
		t.Errorf("NVML total %v, want an 80 GB H100", v)
	}
	for _, name := range []string{"vramscope_lost_messages_total", "vramscope_hook_dropped_total", "vramscope_bad_messages_total"} {
		if fams[name].GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s is %v, want a counter", name, fams[name].GetType())
		}
	}
}

// TestExporterQueueNeverBlocks checks the tap's Put past the queue's
// limit: it returns at once, and the exporter counts what its queue
// skipped.
func TestExporterQueueNeverBlocks(t *testing.T) {
	q := feed.New(feed.WithLimit(4))
	e := metrics.New(q)
	for i := 0; i < 10; i++ {
		q.Put(session.Event{At: time.Unix(1_790_000_000, 0), Note: &session.Note{Kind: session.NoteConnect}})
	}
	fams := scrape(t, e.Handler())
	v := value(t, fams, "vramscope_exporter_dropped_total", nil)
	if v == 0 || v != float64(q.Overflow()) {
		t.Fatalf("dropped %v, want the queue's overflow %d (> 0)", v, q.Overflow())
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, e := newExporter()
	addr, done, err := e.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("server stopped with %v", err)
	}
	if _, _, err := e.Serve(context.Background(), "256.0.0.1:1"); err == nil {
		t.Fatal("Serve on a bad address did not fail")
	}
}
