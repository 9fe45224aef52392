#!/bin/bash
# A Slurm batch script: one vramscope monitor per node of the job
# (slurm-monitor.sh, as a job step beside the training's), then the
# training, then the monitors' end (docs/cluster.md, "Slurm"). The hook in
# every rank reads SLURM_JOB_ID, SLURM_STEP_ID and SLURMD_NODENAME by itself.
#
#   sbatch monitoring/deploy/slurm-job.sh python train.py
#
#SBATCH --job-name=train
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
set -uo pipefail

# sbatch runs a copy of this script: find the monitor script from the
# directory the job was submitted from.
monitor=${VRAMSCOPE_MONITOR:-$SLURM_SUBMIT_DIR/monitoring/deploy/slurm-monitor.sh}
# Prometheus's file-based discovery directory (the one prometheus-slurm.yml
# reads), and where the recordings go: both on a shared file system.
export VRAMSCOPE_TARGETS=${VRAMSCOPE_TARGETS:-/shared/prometheus/targets}
export VRAMSCOPE_RUNS=${VRAMSCOPE_RUNS:-$HOME/vramscope/$SLURM_JOB_ID}
# A socket per job on node-local storage; the monitor makes its directory
# (mode 0700) and the hook finds it through this variable.
export VRAMSCOPE_SOCKET=/tmp/vramscope-$SLURM_JOB_ID/vramscope.sock
mkdir -p "$VRAMSCOPE_RUNS"

srun --ntasks-per-node=1 --overlap --kill-on-bad-exit=0 "$monitor" &
monitors=$!
# The hook connects when its monitor listens (it retries once a second and
# replays the first steps to a late monitor), so nothing waits here.
srun "$@"
status=$?
kill -TERM "$monitors" 2>/dev/null
wait "$monitors"
exit "$status"
