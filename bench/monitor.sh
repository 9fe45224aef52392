#!/bin/sh
# bench/monitor.sh: the monitor's figures, old against new in one run.
#
#   bench/monitor.sh [BASE]      (BASE: the commit to compare with, default main)
#
# Builds bench/monitor and vramscope from BASE (git archive into a temporary
# directory) and from the working tree, then prints, for each:
#   - the live store's heap and RSS, 64 and 256 processes at 2,000 messages/s;
#   - report and report --json on a 1M-step recording (bench/million) and on a
#     64-process recording of 2,000 messages/s each (bench/million -procs);
#   - the TUI frame at 200x60 with 256 processes and an hour of data
#     (go test ./tui -bench Frame).
# The recordings go to $TMPDIR and are deleted at the end. Set MONITOR_FOR,
# BIG_FOR or STEPS to shorten a run.
set -eu
base=${1:-main}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vsbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$root"

echo "load: $(cat /proc/loadavg); base $(git rev-parse --short "$base"); new $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
mkdir -p "$tmp/old"
git archive "$base" | tar -x -C "$tmp/old"
# The benchmark programs are the new ones, built against each tree; the old
# tree's live monitor built its store with session.New().
mkdir -p "$tmp/old/bench/monitor" "$tmp/old/bench/million"
cp bench/monitor/main.go "$tmp/old/bench/monitor/"
sed -i 's/session.New(session.WithLiveBounds())/session.New()/' "$tmp/old/bench/monitor/main.go"
cp bench/million/main.go "$tmp/old/bench/million/"
cp tui/frame_bench_test.go "$tmp/old/tui/"
for v in old new; do
	src=$root
	[ $v = old ] && src=$tmp/old
	(cd "$src" && go build -o "$tmp/monitor-$v" ./bench/monitor && go build -o "$tmp/million-$v" ./bench/million &&
		go build -o "$tmp/vramscope-$v" .)
done

time_of() { # label, command...: wall, CPU and max RSS of one command
	label=$1
	shift
	/usr/bin/time -f "$label: %e s wall, %U s user + %S s sys, max RSS %M KB" "$@" >/dev/null
}

echo "## live store"
for procs in 64 256; do
	for v in old new; do
		printf '%s: ' $v
		"$tmp/monitor-$v" -procs $procs -rate 2000 -for "${MONITOR_FOR:-2m}"
	done
done

echo "## report on ${STEPS:-1000000} steps"
"$tmp/million-new" -steps "${STEPS:-1000000}" -edge 100us -o "$tmp/million.jsonl"
ls -l "$tmp/million.jsonl" | awk '{print "recording: " $5 " bytes"}'
for v in old new; do
	time_of "$v report" "$tmp/vramscope-$v" report "$tmp/million.jsonl"
done
cmp -s "$tmp/million.jsonl" /dev/null || true
"$tmp/vramscope-old" report "$tmp/million.jsonl" >"$tmp/old.txt"
"$tmp/vramscope-new" report "$tmp/million.jsonl" >"$tmp/new.txt"
cmp -s "$tmp/old.txt" "$tmp/new.txt" && echo "report text: identical" || echo "report text: DIFFERS"
rm -f "$tmp/million.jsonl"

echo "## report --json on 64 processes × 2,000 messages/s for ${BIG_FOR:-90s}"
"$tmp/million-new" -procs 64 -for "${BIG_FOR:-90s}" -o "$tmp/big.jsonl"
ls -l "$tmp/big.jsonl" | awk '{printf "recording: %.2f GiB\n", $5/2^30}'
for v in old new; do
	time_of "$v report --json" "$tmp/vramscope-$v" report --json "$tmp/big.jsonl"
done
"$tmp/vramscope-old" report --json "$tmp/big.jsonl" >"$tmp/old.json"
"$tmp/vramscope-new" report --json "$tmp/big.jsonl" >"$tmp/new.json"
cmp -s "$tmp/old.json" "$tmp/new.json" && echo "report --json: identical" || echo "report --json: DIFFERS"
rm -f "$tmp/big.jsonl"

echo "## TUI frame, 200x60, 256 processes, 1 h of data"
for v in old new; do
	src=$root
	[ $v = old ] && src=$tmp/old
	printf '%s: ' $v
	(cd "$src" && go test ./tui -run XXX -bench FrameBusy -benchtime 20x | grep Benchmark)
done
