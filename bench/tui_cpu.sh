#!/usr/bin/env bash
# tui_cpu.sh: CPU used by the real vramscope TUI process, read from
# /proc/PID/stat (utime + stime) over a window, in a detached tmux.
#
#   idle:   `vramscope --socket DIR/s.sock`, nothing connects (target ≤ 0.5 %)
#   fed:    the same, with a stdlib Python hook client sending RATE
#           messages/s (default 1,000: phase edges for 0.4 s steps, the
#           rest 50 Hz-style samples) to its socket (target ≤ 5 %). Only
#           the vramscope process is measured, not the client.
#   demo:   `vramscope demo --ranks 3 --speed 4`, ≈ 1,000 events/s. The
#           demo runs its simulated hook clients and NVML in the same
#           process, so this figure includes them.
#
# Usage: bench/tui_cpu.sh [seconds]   (default 20; BIN=bin/vramscope)
# Prints one line per case: CPU % of one core, and the CPU seconds used.
set -euo pipefail

BIN=${BIN:-bin/vramscope}
DUR=${1:-20}
WARM=${WARM:-3}
SOCK_DIR=$(mktemp -d /tmp/vramscope-bench.XXXXXX)
TMUX_SOCK=vramscope-bench-$$
HZ=$(getconf CLK_TCK)

cleanup() {
	tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true
	rm -rf "$SOCK_DIR"
}
trap cleanup EXIT

# cpu_ticks PID: utime + stime (fields 14 and 15; the name in field 2 may
# hold spaces, so count from the closing parenthesis).
cpu_ticks() {
	local rest
	rest=$(sed 's/^.*) //' "/proc/$1/stat")
	awk '{ print $12 + $13 }' <<<"$rest"
}

# measure NAME CMD...: run CMD in a 160×48 tmux pane, let it warm up, then
# read its CPU time over DUR seconds.
measure() {
	local name=$1
	shift
	tmux -L "$TMUX_SOCK" new-session -d -s bench -x 160 -y 48 "exec $*"
	local pid
	pid=$(tmux -L "$TMUX_SOCK" display-message -p -t bench '#{pane_pid}')
	sleep "$WARM"
	local t0 t1
	t0=$(cpu_ticks "$pid")
	sleep "$DUR"
	t1=$(cpu_ticks "$pid")
	tmux -L "$TMUX_SOCK" kill-server
	sleep 0.5
	awk -v n="$name" -v d="$((t1 - t0))" -v hz="$HZ" -v s="$DUR" \
		'BEGIN { printf "%-8s %6.2f %% of one core  (%.2f s CPU in %d s)\n", n, 100 * d / hz / s, d / hz, s }'
}

RATE=${RATE:-1000}

# feeder: a hook client speaking protocol v1 at RATE messages a second, in
# 10 ms batches, until killed.
feeder() {
	python3 - "$SOCK_DIR/s.sock" "$RATE" <<'PY'
import json, socket, sys, time
path, rate = sys.argv[1], int(sys.argv[2])
for _ in range(100):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(path); break
    except OSError:
        time.sleep(0.05)
mem = lambda a: {"allocated": a, "max_allocated": 4 << 30, "reserved": 5 << 30, "max_reserved": 5 << 30, "alloc_retries": 0, "ooms": 0}
seq, t0 = 0, time.monotonic()
def send(lines):
    s.sendall("".join(json.dumps(l, separators=(",", ":")) + "\n" for l in lines).encode())
send([{"v": 1, "type": "hello", "seq": 0, "t": t0, "session": "bench%d" % time.time_ns(), "pid": 4242,
       "host": "bench", "argv": ["bench"], "torch": "2.3.1", "clock": {"mono": t0, "wall": time.time()},
       "cuda": {"index": 0, "uuid": "GPU-0", "name": "bench", "total": 80 << 30},
       "hook": {"version": "0.1.0", "sample_hz": 50.0, "reset_peaks": False, "activations_every": 100}}])
phases = ["zero_grad", "forward", "loss", "backward", "step"]
sent, tick = 0, t0
while True:
    tick += 0.01
    time.sleep(max(tick - time.monotonic(), 0))
    now = time.monotonic()
    lines = []
    while sent < (now - t0) * rate:
        seq += 1; sent += 1
        k = int((now - t0) / 0.08)  # a phase edge every 80 ms: 5 phases per 0.4 s step
        if seq % 80 == 0:
            lines.append({"v": 1, "type": "phase", "seq": seq, "t": now, "name": phases[k % 5], "step": k // 5,
                          "micro": 0, "edge": "begin", "user": False, "mem": mem(1 << 30)})
        else:
            lines.append({"v": 1, "type": "sample", "seq": seq, "t": now, "mem": mem((1 + seq % 300) << 23)})
    send(lines)
PY
}

measure idle "$BIN" --socket "$SOCK_DIR/s.sock"
feeder 2>/dev/null &
FEEDER=$!
measure fed "$BIN" --socket "$SOCK_DIR/s.sock"
kill "$FEEDER" 2>/dev/null || true
wait "$FEEDER" 2>/dev/null || true
measure demo "$BIN" demo --ranks 3 --speed 4
