#!/usr/bin/env bash
# The GPU checks, run as one script on a lent GPU machine (the device tool):
# the real allocator's read and reset costs, whether the hook makes the
# training thread wait for the GPU, what a read leaves to the garbage
# collector, seed 001 with the user's own
# stat_cuda prints compared with and without the hook (recorded by the real
# monitor), a k-fold loop's counters with and without it, a bounded _record_memory_history capture of a leaking loop, a real
# out-of-memory error with and without the hook, bench/cost_model.py on the
# real allocator, the hook's long-run cost on it (bench/steady_cost.py, steps
# synced and unsynced), and a real Lightning fit on the GPU
# (bench/lightning_cost.py).
# Everything lands under $OUT; each step has its own timeout, cut to what is
# left of BUDGET seconds (default 520) so that the archive is always written.
#
#   bash bench/gpu/checks.sh SEED001.py    (from the repository root, bin/vramscope built)
#   QUICK=1 bash bench/gpu/checks.sh ...   (the read costs, seed 001, the cost
#                                           model, the long run and Lightning
#                                           only: the step path's checks)
#   BLOCKS=20 ROUNDS=8 LSTEPS=150 ...       (the cost model's blocks, Lightning's
#                                           rounds and steps: 10, 4 and 200;
#                                           LSTEPS=0 skips Lightning)
#   SROUNDS=4 SSTEPS=2000 ...               (the long run's rounds and steps a
#                                           block: 3 and 1500)
#   PYSPY=.gpu/py-spy ...                   (also profile one synced long run
#                                           with this py-spy binary, carried:
#                                           the machine has none; 250 samples
#                                           a second, non-blocking, raw stacks)
#   PROBES=0 ...                            (skip the read cost, the sync check and
#                                           the collector census)
#   OLD_HOOK=DIR ...                        (the cost model, Lightning and the
#                                           k-fold loop also run the vramscope
#                                           package copied in DIR: old against new)
#   KFOLD=0 ...                             (skip the k-fold loop, bench/gpu/kfold_run.py;
#                                           KFARGS="--device cpu" smoke-tests it)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/pyhook
O=${OUT:-/tmp/vramscope-gpu}; mkdir -p "$O"
SEED=${1:?usage: checks.sh path/to/seed001.py}
S=$(mktemp -d /tmp/vsgpu.XXXXXX)
log() { echo "== $(date +%T) $*"; }
END=$(( $(date +%s) + ${BUDGET:-520} ))
# left N: N seconds, or what is left of the budget (at least 1) when that is less
left() { local l=$(( END - $(date +%s) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }

log machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
bin/vramscope version
bin/vramscope devices 2>&1 | head -12

if [ "${PROBES:-1}" != 0 ]; then
log "read and reset cost"
timeout $(left 60) python3 bench/gpu/read_cost.py --n 20000 --json "$O/read_cost.json"

log "synchronising operations, and what a read leaves to the garbage collector"
timeout $(left 60) python3 bench/gpu/sync_check.py --steps 300 2>&1 | grep -v RuntimeWarning | tee "$O/sync_check.txt"
timeout $(left 90) python3 bench/gc_census.py --device cuda --steps 3000 ${OLD_HOOK:+--old "$OLD_HOOK"} 2>&1 \
  | grep -v RuntimeWarning | tee "$O/gc_census.txt"
fi

log "seed 001 without the hook"
timeout $(left 90) python3 "$SEED" --steps 8 --truth "$O/s001_nohook.json" > "$O/s001_nohook.txt" 2>&1
log "seed 001 with the hook, recorded"
bin/vramscope record -o "$O/s001_gpu.jsonl.gz" --socket "$S/s.sock" > "$O/s001_record.txt" 2>&1 & R=$!
sleep 1
VRAMSCOPE_SOCKET="$S/s.sock" timeout $(left 90) python3 "$SEED" --hook --steps 8 --truth "$O/s001_hook.json" > "$O/s001_hook.txt" 2>&1
sleep 1.5; kill -INT $R; wait $R
if diff <(grep -- '^--' "$O/s001_nohook.txt") <(grep -- '^--' "$O/s001_hook.txt"); then
  echo "SEED001: the user's stat_cuda prints are IDENTICAL with and without the hook"
else
  echo "SEED001: the prints DIFFER"
fi
cat "$O/s001_record.txt"
bin/vramscope report "$O/s001_gpu.jsonl.gz" > "$O/s001_report.txt" 2>&1
bin/vramscope report --json "$O/s001_gpu.jsonl.gz" > "$O/s001_report.json" 2>&1
head -30 "$O/s001_report.txt"

if [ "${KFOLD:-1}" != 0 ]; then
log "a k-fold loop (a new model and Adam each fold): the user's counters with and without the hook"
KF="python3 bench/gpu/kfold_run.py --folds ${KFOLDS:-3} --steps ${KSTEPS:-6} ${KFARGS:-}"
timeout $(left 60) $KF > "$O/kfold_nohook.txt" 2>&1
timeout $(left 60) bin/vramscope run --record "$O/kfold_run.jsonl.gz" -- $KF > "$O/kfold_run.txt" 2>&1
timeout $(left 60) $KF --hook > "$O/kfold_watch.txt" 2>&1
kinds="run watch"
if [ -n "${OLD_HOOK:-}" ]; then
  # the old hook: auto-attach as `vramscope run` starts it, and watch() per fold
  mkdir -p "$S/start"; cp launch/sitecustomize.py "$S/start/"
  bin/vramscope record -o "$O/kfold_run_old.jsonl.gz" --socket "$S/k.sock" > /dev/null 2>&1 & R=$!
  sleep 1
  VRAMSCOPE_SOCKET="$S/k.sock" PYTHONPATH="$S/start:$(dirname "$OLD_HOOK")" timeout $(left 60) $KF \
    > "$O/kfold_run_old.txt" 2>&1
  sleep 1; kill -INT $R; wait $R
  PYTHONPATH="$(dirname "$OLD_HOOK")" timeout $(left 60) $KF --hook > "$O/kfold_watch_old.txt" 2>&1
  kinds="$kinds run_old watch_old"
fi
for k in $kinds; do
  if diff <(grep -- '^--' "$O/kfold_nohook.txt") <(grep -- '^--' "$O/kfold_$k.txt") > "$O/kfold_$k.diff"; then
    echo "KFOLD $k: the user's counters are IDENTICAL with and without the hook"
  else
    echo "KFOLD $k: the counters DIFFER ($(grep -c '^>' "$O/kfold_$k.diff") of $(grep -c -- '^--' "$O/kfold_nohook.txt") lines):"
    grep '^>' "$O/kfold_$k.diff" | head -4
  fi
done
tail -3 "$O/kfold_nohook.txt"
bin/vramscope report "$O/kfold_run.jsonl.gz" 2>&1 | grep totals
fi

log "cost model on the real allocator"
timeout $(left 200) python3 bench/cost_model.py --device cuda --size h100mlp --blocks ${BLOCKS:-10} --steps 40 --no-profiler \
  ${OLD_HOOK:+--old "$OLD_HOOK"} 2>&1 | tee "$O/cost_cuda.txt"

for sync in "" --unsynced; do
  log "the long run on the real allocator ${sync:-synced}"
  timeout $(left 200) python3 bench/steady_cost.py --device cuda $sync --bin bin/vramscope \
    --rounds ${SROUNDS:-3} --steps ${SSTEPS:-1500} ${OLD_HOOK:+--old "$OLD_HOOK"} 2>&1 \
    | tee "$O/steady_cuda${sync:+_unsynced}.txt"
done

if [ -n "${PYSPY:-}" ]; then
  log "the synced long run, profiled"
  timeout $(left 150) "$PYSPY" record -r 250 --nonblocking -t -f raw -o "$O/steady_profile.txt" -- \
    python3 bench/steady_cost.py --device cuda --rounds 2 --steps 1000 2>&1 | grep -v RuntimeWarning | tail -n 8
fi

if [ "${LSTEPS:-200}" != 0 ]; then
log "Lightning on the GPU"
timeout $(left 200) python3 bench/lightning_cost.py --device cuda --steps ${LSTEPS:-200} --rounds ${ROUNDS:-4} \
  ${OLD_HOOK:+--old "$OLD_HOOK"} 2>&1 | tee "$O/lightning_cuda.txt"
fi

if [ -z "${QUICK:-}" ]; then
log "bounded _record_memory_history capture of a leaking loop"
timeout $(left 90) python3 bench/gpu/snapshot_capture.py -o "$O/leak_snapshot.pickle" --json "$O/leak_snapshot.json"

log "out of memory with the hook, recorded"
bin/vramscope record -o "$O/oom_gpu.jsonl.gz" --socket "$S/o.sock" > "$O/oom_record.txt" 2>&1 & R=$!
sleep 1
VRAMSCOPE_SOCKET="$S/o.sock" timeout $(left 120) python3 bench/gpu/oom_capture.py --hook --json "$O/oom_hook.json" 2>&1 | tail -3
sleep 1.5; kill -INT $R; wait $R; cat "$O/oom_record.txt"
log "out of memory without the hook, snapshot at the error"
timeout $(left 120) python3 bench/gpu/oom_capture.py --json "$O/oom_nohook.json" --snapshot "$O/oom_snapshot.pickle" --max-entries 2000 2>&1 | tail -3

log "a leaking loop watched by the hook, recorded: census and capture on suspicion"
mkdir -p "$O/leak"
bin/vramscope record -o "$O/leak/leak_gpu.jsonl.gz" --socket "$S/l.sock" > "$O/leak_record.txt" 2>&1 & R=$!
sleep 1
VRAMSCOPE_SOCKET="$S/l.sock" timeout $(left 120) python3 bench/gpu/leak_run.py > "$O/leak_hook.txt" 2>&1
sleep 2; kill -INT $R; wait $R; cat "$O/leak_record.txt"
timeout $(left 120) python3 bench/gpu/leak_run.py --no-hook > "$O/leak_nohook.txt" 2>&1
if diff <(grep -v '^vramscope' "$O/leak_nohook.txt") <(grep -v '^vramscope' "$O/leak_hook.txt"); then
  echo "LEAK RUN: the user's counters and weights are IDENTICAL with and without the hook"
else
  echo "LEAK RUN: the counters or weights DIFFER"
fi
ls -la "$O/leak"
bin/vramscope report "$O/leak/leak_gpu.jsonl.gz" > "$O/leak_report.txt" 2>&1; head -12 "$O/leak_report.txt"
bin/vramscope report --json "$O/leak/leak_gpu.jsonl.gz" > "$O/leak_report.json" 2>&1
for f in "$O"/leak/*.pickle; do
  [ -e "$f" ] && python3 -c 'import pickle, sys, torch.cuda._memory_viz as v; s = pickle.load(open(sys.argv[1], "rb")); print("memory_viz read", sys.argv[1], len(s["segments"]), "segments,", len(v.trace_plot(s)), "bytes of trace_plot")' "$f"
done

fi

log done
# The device tool brings back a few files only: everything travels as one archive.
tar -C "$O" -czf "$O/../gpu-checks.tar.gz" . && rm -rf "$O"/* && mv "$O/../gpu-checks.tar.gz" "$O/"
ls -la "$O"
