#!/usr/bin/env bash
# Real framework training on a lent GPU (bench/gpu/frameworks_run.py): each
# of transformers' Trainer (plain, and with gradient checkpointing) and
# Lightning runs without the hook, then with its VramscopeCallback recorded
# by the real monitor; the user's own counters after every update must be
# identical. Everything lands under $OUT/frameworks (the caller archives it).
#
#   bash bench/gpu/frameworks.sh [STEPS]   (from the repository root, bin/vramscope built)
#   FWS=hf bash bench/gpu/frameworks.sh    (some of them only)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/pyhook
O=${OUT:-/tmp/vramscope-gpu}/frameworks; mkdir -p "$O"
STEPS=${1:-60}
S=$(mktemp -d /tmp/vsfw.XXXXXX)
for fw in ${FWS:-hf hf-ckpt lightning}; do
  echo "== $(date +%T) $fw"
  timeout 150 python3 bench/gpu/frameworks_run.py --fw "$fw" --steps "$STEPS" ${FW_ARGS:-} > "$O/${fw}_nohook.txt" 2>&1
  bin/vramscope record -o "$O/$fw.jsonl.gz" --socket "$S/$fw.sock" > "$O/${fw}_record.txt" 2>&1 & R=$!
  sleep 1
  VRAMSCOPE_SOCKET="$S/$fw.sock" timeout 150 python3 bench/gpu/frameworks_run.py --fw "$fw" --steps "$STEPS" --hook ${FW_ARGS:-} \
    > "$O/${fw}_hook.txt" 2>&1
  sleep 1.5; kill -INT $R; wait $R
  pat='^(step|weights|evaluated)'
  if [ "$(grep -cE "$pat" "$O/${fw}_nohook.txt")" -gt "$STEPS" ] &&
     diff <(grep -E "$pat" "$O/${fw}_nohook.txt") <(grep -E "$pat" "$O/${fw}_hook.txt") > /dev/null; then
    echo "$fw: the user's counters and weights are IDENTICAL with and without the hook"
  else
    echo "$fw: the counters or weights DIFFER (or a run failed)"; tail -n 3 "$O/${fw}_nohook.txt" "$O/${fw}_hook.txt"
  fi
  cat "$O/${fw}_record.txt"
  bin/vramscope report "$O/$fw.jsonl.gz" > "$O/${fw}_report.txt" 2>&1
  sed -n '/diagnosis/,/^$/p' "$O/${fw}_report.txt" | head -12
done
