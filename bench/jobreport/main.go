// Command jobreport writes the recordings of a big job, one per node, for
// measuring `vramscope report DIR` (the job view): -nodes nodes of
// -ranks-per-node ranks, each rank -steps steps of an exact-peaks hook as
// docs/protocol.md describes it: breakdown steps 0-2 and every 100th
// (every automatic end edge read), then plain steps (one read at the step's end, same_as 2),
// 50 Hz samples over each -step, a stats message every 5 steps. Rank r
// needs 4 MiB more than rank r-1; rank -leak holds 8 MiB more every step
// (its steps all read in full, as a hook does past the noise).
//
//	go run ./bench/jobreport -o /tmp/job1024      # 128 nodes × 8 ranks × 1,000 steps
//	/usr/bin/time -f '%e s, %M KB' bin/vramscope report /tmp/job1024 >/dev/null
package main

import (
	"bufio"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
)

const (
	wall0 = 1763794800.0
	mono0 = 1000.0
	mib   = int64(1) << 20
	gib   = int64(1) << 30
)

var phases = [...]string{"zero_grad", "forward", "loss", "backward", "step"}

type config struct {
	nodes, perNode, steps, leak int
	step                        time.Duration
	dir                         string
}

func main() {
	var c config
	flag.IntVar(&c.nodes, "nodes", 128, "nodes (one recording each)")
	flag.IntVar(&c.perNode, "ranks-per-node", 8, "ranks on each node")
	flag.IntVar(&c.steps, "steps", 1000, "steps of each rank")
	flag.IntVar(&c.leak, "leak", 777, "the rank that leaks 8 MiB a step (-1: none)")
	flag.DurationVar(&c.step, "step", 200*time.Millisecond, "one step's duration in hook time")
	flag.StringVar(&c.dir, "o", "", "directory to write NODE.jsonl.gz into (created)")
	flag.Parse()
	if c.dir == "" {
		fmt.Fprintln(os.Stderr, "jobreport: -o DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "jobreport:", err)
		os.Exit(1)
	}
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				if err := writeNode(c, n); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for n := range c.nodes {
		next <- n
	}
	close(next)
	wg.Wait()
	if failed != nil {
		fmt.Fprintln(os.Stderr, "jobreport:", failed)
		os.Exit(1)
	}
	fmt.Printf("wrote %d recordings of %d ranks × %d steps in %s\n", c.nodes, c.perNode, c.steps, time.Since(start).Round(time.Millisecond))
}

// writeNode writes one node's recording: its ranks step by step, side by
// side on their own connections.
func writeNode(c config, n int) error {
	host := fmt.Sprintf("node-%04d", n)
	path := filepath.Join(c.dir, host+".jsonl.gz")
	f, err := safefs.OpenFile(path, safefs.Exclusive, 0o600)
	if err != nil {
		return err
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := bufio.NewWriterSize(gz, 1<<20)
	fmt.Fprintf(w, `{"vramscope_recording":1,"version":"1.0","created":"2025-11-22T08:00:00Z","tool":"bench/jobreport","host":%q,"argv":["jobreport"],"source":"live"}`+"\n", host)
	ranks := make([]*rank, c.perNode)
	for i := range ranks {
		r := n*c.perNode + i
		ranks[i] = &rank{w: w, conn: i + 1, rank: r, world: c.nodes * c.perNode, host: host, leak: r == c.leak, gap: c.step.Seconds()}
		ranks[i].hello()
	}
	for s := 0; s < c.steps; s++ {
		for _, r := range ranks {
			r.stepAt(s)
		}
	}
	for _, r := range ranks {
		r.msg(`"type":"goodbye","reason":"exit","stats":{"created":1,"dropped":0,"evicted":0,"send_errors":0,"connects":1}`)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// rank is one rank's hook.
type rank struct {
	w          *bufio.Writer
	conn, rank int
	world      int
	host       string
	leak       bool
	gap        float64 // seconds a step
	seq        int
	mono       float64
	b, body    []byte
}

func (r *rank) msg(body string) {
	b := r.b[:0]
	b = append(b, `{"t":`...)
	b = strconv.AppendFloat(b, wall0+(r.mono-mono0), 'f', 6, 64)
	b = append(b, `,"conn":`...)
	b = strconv.AppendInt(b, int64(r.conn), 10)
	b = append(b, `,"msg":{"v":1,"seq":`...)
	b = strconv.AppendInt(b, int64(r.seq), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendFloat(b, r.mono, 'f', 6, 64)
	b = append(b, ',')
	b = append(b, body...)
	b = append(b, "}}\n"...)
	r.w.Write(b)
	r.b = b
	r.seq++
}

func (r *rank) hello() {
	r.mono = mono0
	r.msg(fmt.Sprintf(`"type":"hello","session":"r%d","pid":%d,"host":%q,"argv":["train.py"],"rank":%d,"local_rank":%d,"world_size":%d,`+
		`"torch":"2.15.0","cuda":{"index":%d,"uuid":"GPU-%s-%d","name":"NVIDIA H100 80GB HBM3","total":85520809984},`+
		`"clock":{"mono":%g,"wall":%g},"hook":{"version":"0.2.0","sample_hz":50,"reset_peaks":false,"activations_every":100,"exact_peaks":true},`+
		`"mem_source":{"kind":"cuda","peaks":"exact"},"job":{"id":"81234","source":"slurm","step":"0","node":%q}`,
		r.rank, 10000+r.rank, r.host, r.rank, r.conn-1, r.world, r.conn-1, r.host, r.conn-1, mono0, wall0, r.host))
}

// phasePeak is what each phase adds at its peak over the memory held
// between steps (backward peaks highest), phaseEnd what it leaves.
var (
	phasePeak = [...]int64{gib / 8, 12 * gib, 13 * gib, 20 * gib, 6 * gib}
	phaseEnd  = [...]int64{0, 11 * gib, 12 * gib, 0, 0}
)

// memJSON appends a read of step s: allocated at held+now, the peak since
// the previous read at held+peak.
func (r *rank) memJSON(dst []byte, s int, now, peak int64) []byte {
	held := 20*gib + int64(r.rank)*4*mib
	if r.leak {
		held += int64(s) * 8 * mib
	}
	a, p, res := held+now, held+max(peak, now), held+24*gib
	dst = append(dst, `"mem":{"allocated":`...)
	dst = strconv.AppendInt(dst, a, 10)
	dst = append(dst, `,"max_allocated":`...)
	dst = strconv.AppendInt(dst, p, 10)
	dst = append(dst, `,"reserved":`...)
	dst = strconv.AppendInt(dst, res, 10)
	dst = append(dst, `,"max_reserved":`...)
	dst = strconv.AppendInt(dst, res, 10)
	return append(dst, '}')
}

// stepAt sends step s: its ten edges, its samples and, every five steps,
// stats.
func (r *rank) stepAt(s int) {
	breakdown := s < 3 || r.leak || s%100 == 0
	edge := r.gap / 10
	for i, name := range phases {
		for _, e := range [...]string{"begin", "end"} {
			r.mono += edge
			b := append(r.body[:0], `"type":"phase","name":"`...)
			b = append(b, name...)
			b = append(b, `","step":`...)
			b = strconv.AppendInt(b, int64(s), 10)
			b = append(b, `,"edge":"`...)
			b = append(b, e...)
			b = append(b, `","user":false,"model":"Llama",`...)
			switch {
			case e == "end" && breakdown:
				b = r.memJSON(b, s, phaseEnd[i], phasePeak[i])
			case e == "end" && name == "step":
				b = r.memJSON(b, s, 0, phasePeak[3])
				b = append(b, `,"span":"step","same_as":2`...)
			default:
				b = append(b, `"mem":null`...)
			}
			r.body = b
			r.msg(string(b))
			if e == "begin" && (name == "forward" || name == "backward") {
				for k := 0; k < 5; k++ { // 50 Hz over the long phases
					b = append(r.body[:0], `"type":"sample",`...)
					b = r.memJSON(b, s, int64(k)*gib, int64(k)*gib)
					r.body = b
					r.msg(string(b))
				}
			}
		}
	}
	if s%5 == 4 {
		r.msg(`"type":"stats","stats":{"created":` + strconv.Itoa(r.seq+1) + `,"dropped":0,"evicted":0,"send_errors":0,"connects":1}`)
	}
}
