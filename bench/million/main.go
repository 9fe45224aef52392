// Command million writes a recording of a fast training loop: N steps of the
// five phases, each edge 1 ms after the last in hook time and carrying the
// allocator's figures, as a small model on a fast GPU produces
// (-edge 100us makes the steps 1 ms apart): the load a report and a
// replay must take in bounded time and memory. With -live it instead
// feeds the same messages to a session
// store, as the live monitor does, and prints the largest heap it saw.
//
//	go run ./bench/million -steps 1000000 -o /tmp/million.jsonl
//	/usr/bin/time -v bin/vramscope report /tmp/million.jsonl >/dev/null
//	go run ./bench/million -steps 1000000 -live
//
// The memory figures are those of testdata/h100/s001 (a 1.1 GB model, the
// weights, gradients and Adam state it holds); only their rate is made up.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
	"github.com/vramscope/vramscope/record"
	"github.com/vramscope/vramscope/session"
)

const header = `{"vramscope_recording":1,"version":"1.0","created":"2025-11-22T08:00:00Z","tool":"bench/million","host":"h","argv":["million"],"source":"live"}`

const (
	wall0 = 1763794800.0
	mono0 = 1000.0
	gib   = 1 << 30
)

// edgeGap is the hook time between two edges (-edge).
var edgeGap = time.Millisecond

var phases = [...]string{"zero_grad", "forward", "loss", "backward", "step"}

func main() {
	steps := flag.Int("steps", 1000000, "training steps")
	out := flag.String("o", "", "recording to write")
	live := flag.Bool("live", false, "feed a session store instead and print its largest heap")
	prof := flag.String("cpuprofile", "", "write a CPU profile of -live here")
	in := flag.String("in", "", "with -live, read this recording instead of generating one")
	memprof := flag.String("memprofile", "", "with -live, write a heap profile at the end here")
	flag.DurationVar(&edgeGap, "edge", time.Millisecond, "hook time between two edges")
	procs := flag.Int("procs", 0, "write this many processes, each sending -rate messages a second for -for, instead of -steps")
	rate := flag.Int("rate", 2000, "with -procs, messages a second per process")
	dur := flag.Duration("for", 2*time.Minute, "with -procs, hook time")
	flag.Parse()
	if *prof != "" {
		f, err := safefs.OpenFile(*prof, safefs.Truncate, 0o600)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if *live {
		st := feedStore(*steps, *in)
		if *memprof != "" {
			if f, err := safefs.OpenFile(*memprof, safefs.Truncate, 0o600); err == nil {
				pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		runtime.KeepAlive(st)
		return
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "million: -o FILE or -live")
		os.Exit(2)
	}
	f, err := safefs.OpenFile(*out, safefs.Truncate, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "million:", err)
		os.Exit(1)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(header + "\n")
	if *procs > 0 {
		genMany(*procs, *rate, *dur, func(line []byte) { w.Write(line); w.WriteByte('\n') })
	} else {
		gen(*steps, func(line []byte) { w.Write(line); w.WriteByte('\n') })
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "million:", err)
		os.Exit(1)
	}
	f.Close()
}

// gen calls emit with each event line of the recording after its header.
func gen(steps int, emit func([]byte)) {
	var b []byte
	seq := 0
	mono := mono0
	msg := func(body string) {
		b = appendLine(b[:0], 1, seq, mono, body)
		emit(b)
		seq++
	}
	msg(`"type":"hello","session":"million","pid":4242,"host":"h","argv":["train.py"],"torch":"2.3.1","cuda":{"index":0,"uuid":"GPU-1","name":"H100","total":85899345920},"clock":{"mono":1000,"wall":1763794800},"hook":{"version":"0.2.0","sample_hz":50,"reset_peaks":true}`)
	const weights = int64(11 * gib / 10)
	var body []byte
	for s := 0; s < steps; s++ {
		for i, name := range phases {
			for _, edge := range [...]string{"begin", "end"} {
				mono += edgeGap.Seconds()
				alloc := 4*weights + int64(i)*gib/8 + int64(s%7)*1<<20
				body = appendPhase(body[:0], name, s, edge, alloc, 6*weights)
				msg(string(body))
			}
		}
	}
	msg(`"type":"goodbye","reason":"exit"`)
}

// feedStore applies every event to a store as the live view's goroutine
// does, each line decoded by the recording reader (ipc.Decode, as live), and
// prints the largest live heap seen.
func feedStore(steps int, in string) *session.Store {
	var pr io.Reader
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			fmt.Fprintln(os.Stderr, "million:", err)
			os.Exit(1)
		}
		defer f.Close()
		pr = f
	} else {
		r, pw := io.Pipe()
		pr = r
		go generate(steps, pw)
	}
	r, err := record.NewReader("million", pr)

	if err != nil {
		fmt.Fprintln(os.Stderr, "million:", err)
		os.Exit(1)
	}
	st := session.New()
	var peak uint64
	var ms runtime.MemStats
	n := 0
	start := time.Now()
	err = r.Each(func(ev session.Event) {
		st.Apply(ev)
		n++
		if n%500000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "million:", err)
		os.Exit(1)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapAlloc)
	fmt.Printf("steps %d, events %d, %.1f s, largest live heap %.1f MB (sampled every 500k events after a GC)\n",
		steps, n, time.Since(start).Seconds(), float64(peak)/1e6)
	return st
}

// generate writes the recording to pw and closes it.
func generate(steps int, pw *io.PipeWriter) {
	w := bufio.NewWriterSize(pw, 1<<20)
	w.WriteString(header + "\n")
	gen(steps, func(line []byte) { w.Write(line); w.WriteByte('\n') })
	w.Flush()
	pw.Close()
}

// genMany calls emit with each event line of a recording of procs
// processes (ranks of one job, conns 1..procs), each sending rate messages
// a second for dur: the load of a monitor of many busy ranks.
func genMany(procs, rate int, dur time.Duration, emit func([]byte)) {
	var b []byte
	line := func(conn int, seq int, mono float64, body []byte) {
		b = appendLine(b[:0], conn, seq, mono, body)
		emit(b)
	}
	for c := 1; c <= procs; c++ {
		line(c, 0, mono0, fmt.Appendf(nil, `"type":"hello","session":"rank%d","pid":%d,"host":"h","argv":["train.py"],"rank":%d,"world_size":%d,"torch":"2.3.1","cuda":{"index":%d,"uuid":"GPU-%d","name":"H100","total":85899345920},"clock":{"mono":1000,"wall":1763794800},"hook":{"version":"0.2.0","sample_hz":50,"reset_peaks":true}`,
			c-1, 4000+c, c-1, procs, (c-1)%8, (c-1)%8))
	}
	const weights = int64(11 * gib / 10)
	gap := 1.0 / float64(rate)
	n := int(dur.Seconds() * float64(rate))
	var body []byte
	for k := range n {
		s, i := k/10, (k%10)/2
		edge := "begin"
		if k%2 == 1 {
			edge = "end"
		}
		for c := 1; c <= procs; c++ {
			mono := mono0 + float64(k+1)*gap + float64(c-1)*gap/float64(procs)
			alloc := int64(-1)
			if edge == "end" {
				alloc = 4*weights + int64(i)*gib/8 + int64(s%7)<<20 + int64(c)<<10
			}
			body = appendPhase(body[:0], phases[i], s, edge, alloc, 6*weights)
			line(c, k+1, mono, body)
		}
	}
	for c := 1; c <= procs; c++ {
		line(c, n+1, mono0+dur.Seconds()+1, []byte(`"type":"goodbye","reason":"exit"`))
	}
}

// appendPhase appends the body of a phase message: with the allocator's
// figures (allocated alloc, its peak a quarter GiB above, reserved
// reserved) unless alloc is negative.
func appendPhase(b []byte, name string, step int, edge string, alloc, reserved int64) []byte {
	b = append(b, `"type":"phase","name":"`...)
	b = append(b, name...)
	b = append(b, `","step":`...)
	b = strconv.AppendInt(b, int64(step), 10)
	b = append(b, `,"edge":"`...)
	b = append(b, edge...)
	b = append(b, `","user":false`...)
	if alloc < 0 {
		return b
	}
	b = append(b, `,"mem":{"allocated":`...)
	b = strconv.AppendInt(b, alloc, 10)
	b = append(b, `,"max_allocated":`...)
	b = strconv.AppendInt(b, alloc+gib/4, 10)
	b = append(b, `,"reserved":`...)
	b = strconv.AppendInt(b, reserved, 10)
	b = append(b, `,"max_reserved":`...)
	b = strconv.AppendInt(b, reserved, 10)
	return append(b, '}')
}

// appendLine appends an event line of connection conn: its message seq at
// hook time mono, received then, with body after the common keys.
func appendLine[T string | []byte](b []byte, conn, seq int, mono float64, body T) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendFloat(b, wall0+(mono-mono0), 'f', 6, 64)
	b = append(b, `,"conn":`...)
	b = strconv.AppendInt(b, int64(conn), 10)
	b = append(b, `,"msg":{"v":1,"seq":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendFloat(b, mono, 'f', 6, 64)
	b = append(b, ',')
	b = append(b, body...)
	return append(b, "}}"...)
}
