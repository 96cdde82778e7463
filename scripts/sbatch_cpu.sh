#!/usr/bin/env bash
# sbatch_cpu.sh: the CPU trainer under Slurm, one node or several, one MPI rank per task (data parallelism
# with ZeRO, pipeline stages with EXTRA_ARGS="--pp N", tensor parallelism with "--tp N"), one OpenMP thread per
# CPU of the task.
# Preemptible: on SIGUSR1 (sent by Slurm 120 s before the time limit, see --signal below, or by hand with
# `scancel --signal=USR1 JOBID`) or SIGTERM every rank finishes its step, rank 0 writes a checkpoint to
# $OUT_DIR and the job exits 0. Every run passes `-y 1`, so submitting the same script again with the same
# settings continues from the newest complete checkpoint in $OUT_DIR, bit for bit as if it had never
# stopped (a first run starts fresh).
#
# Submit from the repository root (the job cds to $SLURM_SUBMIT_DIR, where ./train_gpt_cpu must be;
# build it first with `make train_gpt_cpu`):
#   sbatch scripts/sbatch_cpu.sh                                   # 2 ranks, ZeRO-1, d2 on the synthetic corpus
#   OUT_DIR=out/d4 STEPS=2000 sbatch --ntasks=4 --time=02:00:00 scripts/sbatch_cpu.sh
#   sbatch --nodes=2 --ntasks-per-node=1 scripts/sbatch_cpu.sh      # one rank on each of 2 nodes
#   EXTRA_ARGS="--pp 2" sbatch --nodes=2 --ntasks=4 scripts/sbatch_cpu.sh   # a stage per node, 2 ranks each
#   MODEL=llama-d4 EXTRA_ARGS="--tp 2 --pp 2" sbatch --nodes=2 --ntasks=8 scripts/sbatch_cpu.sh   # 3D: 2 TP x 2 DP x 2 stages
#   (on several nodes give the total --ntasks: this script's own --ntasks=2 caps --ntasks-per-node)
#   TRAIN_DATA='data/tinyshakespeare/train_*.bin' VAL_DATA='data/tinyshakespeare/val_*.bin' MODEL=d4 \
#     OUT_DIR=out/shakespeare sbatch scripts/sbatch_cpu.sh
# Resubmit (after a preemption, a time limit, or `scancel --signal=USR1 JOBID`): the same command with the
# same environment; the job prints "resume: step N" and appends to $OUT_DIR/log.jsonl. Changing the
# number of tasks or ZERO_STAGE on resubmission is allowed (checkpoints are layout-free), but only the same
# rank count and flags give bit-identical losses.
# Several nodes: Slurm places ranks in blocks (ranks 0..k-1 on the first node), and the trainer makes
# rank = tp index + tp * (data-parallel index + data-parallel size * stage) (tp 1 without --tp), so each TP group and
# each pipeline stage's data-parallel group share a node when the tasks per node are a multiple of tp x data-parallel. OUT_DIR must be a directory every node sees (a
# shared file system): the trainer checks that at start and stops if a rank cannot see rank 0's files.
#
# sbatch options given on the command line override the #SBATCH lines below (--ntasks, --cpus-per-task,
# --time, --partition, --output ...). Without a time limit (--time, or the partition's default)
# --signal=USR1@120 never fires. Settings (environment variables, exported to the job by sbatch):
#   OUT_DIR            checkpoints and log.jsonl                           [out/sbatch_cpu]
#   STEPS              optimizer steps of the whole run (-x)               [300]
#   ZERO_STAGE         0: all-reduce gradients; 1: shard AdamW state (-z)  [1]
#   MODEL              -e: dN or an llm.c model file                      [d2]
#   MICRO_BATCH        -b                                                 [8]
#   SEQ_LEN            -t                                                 [64]
#   CHECKPOINT_EVERY   -n: periodic checkpoints (and one after the last step) [100]
#   TRAIN_DATA         -i: train shard glob (empty: the synthetic corpus) []
#   VAL_DATA           -j: val shard glob                                 []
#   EXTRA_ARGS         more trainer flags, split on spaces (e.g. "-l 1e-3 --grad-accum 2") []
#   BIN                the trainer, relative to the submit directory      [./train_gpt_cpu]
#   REPO_DIR           where to run (relative paths start here)            [$SLURM_SUBMIT_DIR]
#SBATCH --job-name=gpt2-cpu
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --signal=USR1@120
#SBATCH --open-mode=append
#SBATCH --output=slurm-%x-%j.out
set -uo pipefail

REPO_DIR=${REPO_DIR:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
cd "$REPO_DIR" || { echo "sbatch_cpu.sh: cannot cd to $REPO_DIR" >&2; exit 1; }
BIN=${BIN:-./train_gpt_cpu}
OUT_DIR=${OUT_DIR:-out/sbatch_cpu}
STEPS=${STEPS:-300}
ZERO_STAGE=${ZERO_STAGE:-1}
MODEL=${MODEL:-d2}
MICRO_BATCH=${MICRO_BATCH:-8}
SEQ_LEN=${SEQ_LEN:-64}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-100}
TRAIN_DATA=${TRAIN_DATA:-}
VAL_DATA=${VAL_DATA:-}
EXTRA_ARGS=${EXTRA_ARGS:-}
NTASKS=${SLURM_NTASKS:-2}
CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-1}

if [ ! -x "$BIN" ]; then
  echo "sbatch_cpu.sh: no $BIN in $REPO_DIR (run \`make train_gpt_cpu\` there, and submit from there or set REPO_DIR)" >&2
  exit 1
fi
mkdir -p "$OUT_DIR" || exit 1

args=(-e "$MODEL" -b "$MICRO_BATCH" -t "$SEQ_LEN" -x "$STEPS" -z "$ZERO_STAGE" -n "$CHECKPOINT_EVERY")
[ -n "$TRAIN_DATA" ] && args+=(-i "$TRAIN_DATA")
[ -n "$VAL_DATA" ] && args+=(-j "$VAL_DATA")
# shellcheck disable=SC2206  # EXTRA_ARGS is split on purpose
[ -n "$EXTRA_ARGS" ] && args+=($EXTRA_ARGS)
args+=(-o "$OUT_DIR" -y 1 --log "$OUT_DIR/log.jsonl")

export OMP_NUM_THREADS=$CPUS_PER_TASK
# `--signal=USR1@120` and `scancel --signal=USR1` signal the job steps (the trainer's ranks), not this
# shell. Should the shell get USR1 (`--signal=B:USR1@120`, `scancel --batch` or `--full`), it hands it to
# srun, which passes it to every rank; on TERM (scancel, the time limit) Slurm signals the ranks itself.
# Either way the shell keeps waiting for the trainer to checkpoint and exit instead of dying first.
srun_pid=""
trap 'echo "sbatch_cpu.sh: got SIGUSR1, passing it to the trainer"; [ -n "$srun_pid" ] && kill -USR1 "$srun_pid" 2>/dev/null' USR1
trap 'echo "sbatch_cpu.sh: got SIGTERM, waiting for the trainer to checkpoint"' TERM

echo "sbatch_cpu.sh: job ${SLURM_JOB_ID:-?} on $(hostname -s): $NTASKS ranks x $OMP_NUM_THREADS threads on" \
  "${SLURM_JOB_NUM_NODES:-1} node(s) ${SLURM_JOB_NODELIST:-}, in $REPO_DIR"
echo "sbatch_cpu.sh: $BIN ${args[*]}"
srun --mpi=pmix --kill-on-bad-exit=1 --ntasks="$NTASKS" --cpus-per-task="$CPUS_PER_TASK" \
  --export=ALL "$BIN" "${args[@]}" &
srun_pid=$!
# wait returns early when a trapped signal arrives: keep waiting until srun itself has exited
while :; do
  wait "$srun_pid"; rc=$?
  [ "$rc" -le 128 ] && break
  kill -0 "$srun_pid" 2>/dev/null || { wait "$srun_pid"; rc=$?; break; }
done

last=$(grep -o '"step": [0-9]*, "loss"' "$OUT_DIR/log.jsonl" 2>/dev/null | tail -1 | grep -o '[0-9][0-9]*')
# Exit 3 is the watchdog's: a rank waited --comm-timeout in a collective a peer never joined, so a node or a rank
# is gone. Slurm requeues a --requeue job on a node failure only once it has marked the node down (SlurmdTimeout
# after its last answer), and srun may return before that: the job would end FAILED, not go back to the queue.
# A requeueable job is put back here (Slurm keeps it pending until nodes are free; it resumes from the checkpoint).
if [ "$rc" -eq 3 ] && [ -n "${SLURM_JOB_ID:-}" ] && scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -q ' Requeue=1 '; then
  echo "sbatch_cpu.sh: a rank's peer was lost (the watchdog's exit 3 after step ${last:-0}): requeueing job $SLURM_JOB_ID; it resumes from the last checkpoint in $OUT_DIR"
  scontrol requeue "$SLURM_JOB_ID" && exit 3
  echo "sbatch_cpu.sh: scontrol requeue $SLURM_JOB_ID failed; resubmit the same job to resume"
fi
if [ "$rc" -ne 0 ]; then
  echo "sbatch_cpu.sh: the trainer failed (exit $rc) after step ${last:-0} of $STEPS"
elif [ "${last:-0}" -lt "$STEPS" ]; then
  echo "sbatch_cpu.sh: stopped after step ${last:-0} of $STEPS with a checkpoint in $OUT_DIR; resubmit the same job to resume"
else
  echo "sbatch_cpu.sh: finished $STEPS steps; checkpoints and log.jsonl in $OUT_DIR"
fi
exit "$rc"
