#!/usr/bin/env bash
# test_eval_mc.sh: --eval-mc (train/eval_mc.h), scripts/mc_tokenize.py and scripts/hellaswag.sh; the checks are in
# test/test_eval_mc.py. Needs what test_hf.sh needs (torch, transformers, safetensors in TORCH_PYTHON; the
# tokenizer files and Tiny Shakespeare in DATA), mpirun for the ZeRO-3 and --pp 2 layouts (with Open MPI
# missing those two are skipped), ./train_gpt_emu where the CUDA headers are, and lm_eval for scripts/lm_eval.sh.
source "$(dirname "$0")/lib.sh"  # the repo root, $TORCH_PY, the scratch directory $W
DATA=${1:-${DATA_DIR:-../shared/data}}
hf_start "multiple-choice evaluation"
extra=()
[ -x ./train_gpt_emu ] && extra+=(--emu ./train_gpt_emu)
if command -v mpirun >/dev/null && ./train_gpt_cpu --help | grep -q "MPI: yes"; then extra+=(--mpi)
else echo "SKIP --eval-mc on ZeRO-3 and --pp 2: no mpirun, or ./train_gpt_cpu built without MPI (apt-get install libopenmpi-dev openmpi-bin)"; fi
"$TORCH_PY" -c "import lm_eval" 2>/dev/null && extra+=(--lmeval)
"$TORCH_PY" test/test_eval_mc.py --work "$W" --data "$DATA" "${extra[@]}"
