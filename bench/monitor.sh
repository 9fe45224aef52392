#!/bin/sh
# bench/monitor.sh: the monitor's figures, old against new in one run.
#
#   bench/monitor.sh [BASE]      (BASE: the commit to compare with, default main)
#
# Builds bench/monitor, bench/million and vramscope from BASE (git archive
# into a temporary directory, with this tree's benchmark programs) and from
# the working tree, then prints, for each:
#   - the live store's heap and resident memory, 64 and 256 processes at
#     2,000 messages/s each (bench/monitor; a BASE older than
#     session.WithLiveBounds at 256 processes only with OLD256=1: it needs
#     about 8 GB);
#   - report on a 1M-step recording (bench/million, 2.5 GB) and report --json
#     on a recording of 64 processes at 2,000 messages/s each for 150 s
#     (bench/million -procs, 3.85 GB), each output compared byte for byte;
#   - one TUI frame at 200x60 with 256 processes and an hour of data
#     (go test ./tui -bench FrameBusy).
# The recordings go to $TMPDIR and are deleted at the end. MONITOR_FOR, STEPS
# and BIG_FOR shorten a run.
set -eu
base=${1:-main}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vsbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$root"

load() { echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"; }
echo "base $(git rev-parse --short "$base"), new $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with changes'); $(nproc) cores"
load
mkdir -p "$tmp/old"
git archive "$base" | tar -x -C "$tmp/old"
# The benchmark programs are this tree's, built against each tree; a BASE
# older than session.WithLiveBounds built its live store with session.New().
mkdir -p "$tmp/old/bench/monitor" "$tmp/old/bench/million"
oldbounded=0
if grep -q 'func WithLiveBounds' "$tmp/old/session/options.go" 2>/dev/null; then
	oldbounded=1
	cp bench/monitor/main.go "$tmp/old/bench/monitor/"
else
	sed 's/session.New(session.WithLiveBounds())/session.New()/' bench/monitor/main.go >"$tmp/old/bench/monitor/main.go"
fi
cp bench/million/main.go "$tmp/old/bench/million/"
cp tui/frame_bench_test.go "$tmp/old/tui/"
for v in old new; do
	src=$root
	[ $v = old ] && src=$tmp/old
	(cd "$src" && go build -o "$tmp/monitor-$v" ./bench/monitor && go build -o "$tmp/million-$v" ./bench/million &&
		go build -o "$tmp/vramscope-$v" .)
done

# run LABEL OUT CMD...: wall, CPU and largest resident set of CMD, its
# output in OUT.
run() {
	label=$1 out=$2
	shift 2
	/usr/bin/time -f "$label: %e s wall, %U s user + %S s sys, max RSS %M KB" "$@" >"$out"
}

echo "## live store: bench/monitor -rate 2000 -for ${MONITOR_FOR:-1m}"
for procs in 64 256; do
	for v in old new; do
		if [ $v = old ] && [ $procs = 256 ] && [ $oldbounded = 0 ] && [ "${OLD256:-0}" != 1 ]; then
			echo "old: 256 processes skipped (OLD256=1 runs it)"
			continue
		fi
		printf '%s: ' $v
		"$tmp/monitor-$v" -procs $procs -rate 2000 -for "${MONITOR_FOR:-1m}"
	done
	load
done

echo "## report on ${STEPS:-1000000} steps (bench/million -edge 100us)"
"$tmp/million-new" -steps "${STEPS:-1000000}" -edge 100us -o "$tmp/million.jsonl"
echo "recording: $(stat -c %s "$tmp/million.jsonl") bytes"
for v in old new; do
	run "$v report" "$tmp/$v.txt" "$tmp/vramscope-$v" report "$tmp/million.jsonl"
	load
done
cmp -s "$tmp/old.txt" "$tmp/new.txt" && echo "report: byte-identical" || echo "report: DIFFERS"
rm -f "$tmp/million.jsonl"

echo "## report --json on 64 processes x 2,000 messages/s x ${BIG_FOR:-150s} (bench/million -procs 64)"
"$tmp/million-new" -procs 64 -rate 2000 -for "${BIG_FOR:-150s}" -o "$tmp/big.jsonl"
echo "recording: $(stat -c %s "$tmp/big.jsonl") bytes"
for v in old new; do
	run "$v report --json" "$tmp/$v.json" "$tmp/vramscope-$v" report --json "$tmp/big.jsonl"
	load
done
cmp -s "$tmp/old.json" "$tmp/new.json" && echo "report --json: byte-identical" || echo "report --json: DIFFERS"
rm -f "$tmp/big.jsonl" "$tmp/old.json" "$tmp/new.json"

echo "## TUI frame, 200x60, 256 processes, 1 h of data (go test ./tui -bench FrameBusy)"
for v in old new; do
	src=$root
	[ $v = old ] && src=$tmp/old
	printf '%s:\n' $v
	(cd "$src" && go test ./tui -run XXX -bench FrameBusy -benchtime 20x -benchmem | grep Benchmark)
	load
done
