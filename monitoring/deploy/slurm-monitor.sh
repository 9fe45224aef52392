#!/bin/bash
# One node's vramscope monitor for a Slurm job, started on every node by
# slurm-job.sh (srun --ntasks-per-node=1). It records the node's ranks to
# $VRAMSCOPE_RUNS/NODE.jsonl.gz, serves /metrics on $VRAMSCOPE_BIND (the
# node's name, so its own address, never every interface) port
# $VRAMSCOPE_PORT, and writes the Prometheus file-based discovery target
# $VRAMSCOPE_TARGETS/JOB-NODE.json, removed when it stops (SIGTERM from
# slurm-job.sh or scancel).
set -euo pipefail

vramscope=${VRAMSCOPE:-vramscope}
node=${SLURMD_NODENAME:-$(hostname -s)}
bind=${VRAMSCOPE_BIND:-$node}
port=${VRAMSCOPE_PORT:-9840}
target=$VRAMSCOPE_TARGETS/$SLURM_JOB_ID-$node.json

"$vramscope" record -o "$VRAMSCOPE_RUNS/$node.jsonl.gz" --socket "$VRAMSCOPE_SOCKET" \
	--prometheus "$bind:$port" &
pid=$!
stop() {
	rm -f "$target" "$target.tmp"
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || true
}
trap stop EXIT
trap 'exit 0' TERM INT

# Written whole, then renamed: Prometheus never reads half a file.
printf '[{"targets": ["%s:%s"], "labels": {"slurm_job": "%s", "slurm_node": "%s"}}]\n' \
	"$bind" "$port" "$SLURM_JOB_ID" "$node" >"$target.tmp"
mv -f "$target.tmp" "$target"
wait "$pid"
