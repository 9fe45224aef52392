//go:build unix

// Command monitor measures the live monitor's store under many busy
// processes: -procs hook sessions, each sending -rate messages a second
// (the five phases of a step, begin and end, each end with the
// allocator's figures) for -for of hook time, applied to one
// session.Store in time order as the live view's goroutine applies them.
// It prints the live heap after a GC, per process, and the process's
// largest resident set.
//
//	go run ./bench/monitor -procs 64 -rate 2000 -for 2m
//
// bench/monitor.sh builds this program against the base commit and
// against the working tree and prints both.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/internal/safefs"
	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/session"
)

const gib = 1 << 30

var phases = [...]string{"zero_grad", "forward", "loss", "backward", "step"}

func main() {
	procs := flag.Int("procs", 64, "hook sessions")
	rate := flag.Int("rate", 2000, "messages a second per process")
	dur := flag.Duration("for", 2*time.Minute, "hook time fed")
	memprof := flag.String("memprofile", "", "write a heap profile at the end here")
	flag.Parse()

	wall0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	st := session.New(session.WithLiveBounds())
	rank := make([]int, *procs)
	for i := range *procs {
		rank[i] = i
		st.Apply(session.Event{At: wall0, Conn: uint64(i + 1), Msg: &ipc.Message{
			V: 1, Type: ipc.TypeHello, Seq: 0, T: 0, Session: fmt.Sprintf("s%03d", i), PID: 1000 + i,
			Host: "h", Argv: []string{"train.py"}, Rank: &rank[i], Torch: "2.3.1",
			CUDA:  &ipc.CUDADevice{Index: i % 8, UUID: fmt.Sprintf("GPU-%d", i%8), Name: "H100", Total: 80 * gib},
			Clock: &ipc.Clock{Mono: 0, Wall: float64(wall0.UnixNano()) / 1e9},
			Hook:  &ipc.HookConfig{Version: "0.2.0", SampleHz: 50, ResetPeaks: true},
		}})
	}
	gap := time.Second / time.Duration(*rate)
	n := int(*dur / gap)
	const weights = int64(11 * gib / 10)
	start := time.Now()
	var cpu0 = cpuTime()
	for k := range n {
		s, e := k/10, k%10
		edge := ipc.EdgeBegin
		if e%2 == 1 {
			edge = ipc.EdgeEnd
		}
		off := time.Duration(k+1) * gap
		for i := range *procs {
			at := off + time.Duration(i)*gap/time.Duration(*procs)
			m := &ipc.Message{V: 1, Type: ipc.TypePhase, Seq: uint64(k + 1), T: at.Seconds(),
				Name: phases[e/2], Step: s, Edge: edge}
			if edge == ipc.EdgeEnd {
				alloc := 4*weights + int64(e/2)*gib/8 + int64(s%7)<<20 + int64(i)<<10
				m.Mem = &ipc.Mem{Allocated: alloc, MaxAllocated: alloc + gib/4, Reserved: 6 * weights, MaxReserved: 6 * weights}
			}
			st.Apply(session.Event{At: wall0.Add(at), Conn: uint64(i + 1), Msg: m})
		}
	}
	took := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	msgs := n * *procs
	fmt.Printf("%d processes × %d msg/s × %s: %d messages in %.1f s (%.0f ns CPU each); live heap %.1f MB (%.2f MB a process); max RSS %s\n",
		*procs, *rate, *dur, msgs, took.Seconds(), float64(cpu.Nanoseconds())/float64(msgs),
		float64(ms.HeapAlloc)/1e6, float64(ms.HeapAlloc)/1e6/float64(*procs), maxRSS())
	if *memprof != "" {
		if f, err := safefs.OpenFile(*memprof, safefs.Truncate, 0o600); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	runtime.KeepAlive(st)
}

// maxRSS is the process's largest resident set, from /proc/self/status.
func maxRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// cpuTime is the user and system time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
