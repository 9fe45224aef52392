#!/usr/bin/env bash
# Where the 512 B the user's memory_allocated() read more between a census
# on suspicion and its follow-up came from (an H200, testdata/h200/README.md):
# the leaking loop recorded by the real monitor, and without the hook, each
# probed at step 38 (bench/gpu/leak_run.py --probe).
#
#   bash bench/gpu/leak_probe.sh    (from the repository root, bin/vramscope built)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/pyhook
O=${OUT:-/tmp/vramscope-gpu}; mkdir -p "$O/leak"
S=$(mktemp -d /tmp/vsgpu.XXXXXX)
python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, torch.cuda.get_device_name(0))'
bin/vramscope record -o "$O/leak/leak.jsonl.gz" --socket "$S/l.sock" > "$O/leak_record.txt" 2>&1 & R=$!
sleep 1
VRAMSCOPE_SOCKET="$S/l.sock" timeout 120 python3 bench/gpu/leak_run.py --probe 38 > "$O/leak_hook.txt" 2>&1
sleep 2; kill -INT $R; wait $R; cat "$O/leak_record.txt"
timeout 120 python3 bench/gpu/leak_run.py --no-hook --probe 38 > "$O/leak_nohook.txt" 2>&1
diff <(grep -v '^vramscope\|^probe' "$O/leak_nohook.txt") <(grep -v '^vramscope\|^probe' "$O/leak_hook.txt") && echo "IDENTICAL counters"
echo "== probe, with the hook"; grep '^probe' "$O/leak_hook.txt"
echo "== probe, without"; grep '^probe' "$O/leak_nohook.txt"
bin/vramscope report "$O/leak/leak.jsonl.gz" 2>&1 | grep -i "census\|held by\|grew" | head -8
