#!/usr/bin/env bash
# run_node.sh: one node, one rank per GPU, under mpirun.
#   scripts/run_node.sh 124M -o out/gpt2_124M          # a recipe from gpt2_recipes.sh, plus flags
#   NGPU=4 scripts/run_node.sh 350M -o out/350M
#   TRAIN_BIN=./train_gpt_cpu NGPU=2 scripts/run_node.sh none -e d2 -x 100   # no recipe, CPU build
# The trainer checkpoints on SIGTERM/SIGUSR1 and resumes with -y 1; pass -y 1 to continue a run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpt2_recipes.sh
BIN=${TRAIN_BIN:-./train_gpt}
size=${1:?usage: run_node.sh RECIPE|none [flags...]}; shift
command -v mpirun >/dev/null || { echo "error: run_node.sh needs mpirun (apt-get install libopenmpi-dev openmpi-bin; make then builds the trainers with MPI)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "error: run_node.sh: no $BIN (make train_gpt needs the CUDA toolkit's nvcc; TRAIN_BIN=./train_gpt_cpu runs the CPU build)" >&2; exit 1; }
NGPU=${NGPU:-$(command -v nvidia-smi >/dev/null && nvidia-smi -L | wc -l || echo 1)}
args=()
if [ "$size" != none ]; then read -r -a args <<<"$(recipe_args "$size")"; fi
root=(); [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / NGPU > 0 ? $(nproc) / NGPU : 1 ))}
exec mpirun "${root[@]}" -np "$NGPU" --bind-to none -x OMP_NUM_THREADS -x PATH -x LD_LIBRARY_PATH "$BIN" "${args[@]}" "$@"
