#!/usr/bin/env bash
# sbatch_gpu.sh: slurm, one task per GPU, NCCL bootstrapped over MPI (PMIx), one node or many.
#   RECIPE=124M OUT_DIR=out/124M sbatch scripts/sbatch_gpu.sh
#   RECIPE=1.5B OUT_DIR=out/1.5B sbatch --nodes=4 scripts/sbatch_gpu.sh
# RECIPE=none: no recipe, the flags come from EXTRA_ARGS alone; TRAIN_BIN picks the binary. The two-node test
# runs it that way with the emulated CUDA build on nodes without GPUs:
#   RECIPE=none TRAIN_BIN=./train_gpt_emu EXTRA_ARGS="--precision fp32 -e d2 -b 2 -t 80 -x 6 --comm nccl" \
#     sbatch --nodes=2 --ntasks-per-node=1 --gpus-per-node=0 --cpus-per-task=1 scripts/sbatch_gpu.sh
# Preemption: slurm sends SIGUSR1 120 s before the time limit (or on scancel --signal=USR1); every
# rank finishes its step, the checkpoint is written, the job exits 0. Submitting the same command
# again resumes from the newest complete checkpoint in OUT_DIR (-y 1 is always passed).
#SBATCH --job-name=train_gpt
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --signal=USR1@120
#SBATCH --open-mode=append
#SBATCH --output=train_gpt-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
source scripts/gpt2_recipes.sh
RECIPE=${RECIPE:-124M}
OUT_DIR=${OUT_DIR:-out/gpt2_$RECIPE}
BIN=${TRAIN_BIN:-./train_gpt}
mkdir -p "$OUT_DIR"
args=()
if [ "$RECIPE" != none ]; then read -r -a args <<<"$(recipe_args "$RECIPE")"; fi
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
rc=0
srun --mpi=pmix --kill-on-bad-exit=1 "$BIN" "${args[@]}" -o "$OUT_DIR" -y 1 --log "$OUT_DIR/log.jsonl" ${EXTRA_ARGS:-} || rc=$?
# Exit 3 is the watchdog's (a peer never joined a collective: a node or a rank is gone). srun may return before
# Slurm has marked the node down and requeued a --requeue job itself; put such a job back here (sbatch_cpu.sh too).
if [ "$rc" -eq 3 ] && [ -n "${SLURM_JOB_ID:-}" ] && scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -q ' Requeue=1 '; then
  echo "sbatch_gpu.sh: a rank's peer was lost (the watchdog's exit 3): requeueing job $SLURM_JOB_ID; it resumes from the last checkpoint in $OUT_DIR"
  scontrol requeue "$SLURM_JOB_ID" || echo "sbatch_gpu.sh: scontrol requeue $SLURM_JOB_ID failed; resubmit the same job to resume"
fi
exit "$rc"
