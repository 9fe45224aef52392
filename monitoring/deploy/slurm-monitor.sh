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
tmp=
stop() {
	rm -f "$target" ${tmp:+"$tmp"}
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || true
}
trap stop EXIT
trap 'exit 0' TERM INT

# Written whole into a new file of a random name (mktemp: never through a
# link someone left in the shared directory), made readable to
# Prometheus, then renamed over the target: Prometheus never reads half a
# file.
tmp=$(mktemp "$VRAMSCOPE_TARGETS/.vramscope-XXXXXX")
printf '[{"targets": ["%s:%s"], "labels": {"slurm_job": "%s", "slurm_node": "%s"}}]\n' \
	"$bind" "$port" "$SLURM_JOB_ID" "$node" >>"$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$target"
tmp=
wait "$pid"
