#!/usr/bin/env bash
# test_eval_mc.sh: --eval-mc (eval_mc.h), scripts/mc_tokenize.py and scripts/hellaswag.sh; the checks are in
# test/test_eval_mc.py. Needs what test_hf.sh needs (torch, transformers, safetensors in TORCH_PYTHON; the
# tokenizer files and Tiny Shakespeare in DATA), mpirun for the ZeRO-3 and --pp 2 layouts (with Open MPI
# missing those two are skipped), ./train_gpt_emu where the CUDA headers are, and lm_eval for scripts/lm_eval.sh.
set -u
cd "$(dirname "$0")/.."
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
DATA=${1:-${DATA_DIR:-../shared/data}}
for m in torch transformers safetensors; do
  if ! "$TORCH_PY" -c "import $m" 2>/dev/null; then
    echo "SKIP multiple-choice evaluation: $TORCH_PY cannot import $m (.ci/run shows the pip install line)"
    echo "0 passed, 0 failed, 1 skipped"; exit 0
  fi
done
W=$(mktemp -d /tmp/test_eval_mc.XXXXXX)
trap 'rm -rf "$W"' EXIT
extra=()
[ -x ./train_gpt_emu ] && extra+=(--emu ./train_gpt_emu)
if command -v mpirun >/dev/null && ./train_gpt_cpu --help | grep -q "MPI: yes"; then extra+=(--mpi)
else echo "SKIP --eval-mc on ZeRO-3 and --pp 2: no mpirun, or ./train_gpt_cpu built without MPI (apt-get install libopenmpi-dev openmpi-bin)"; fi
"$TORCH_PY" -c "import lm_eval" 2>/dev/null && extra+=(--lmeval)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$TORCH_PY" test/test_eval_mc.py --work "$W" --data "$DATA" "${extra[@]}"
