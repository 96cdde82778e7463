#!/usr/bin/env bash
# test_hf.sh: Hugging Face export and import (scripts/export_hf.py, scripts/import_hf.py) against
# transformers, the trainer's own forward and sampler (test/hf_forward) and both builds; the checks are
# in test/test_hf.py. Needs Debian's python with torch (TORCH_PYTHON) plus transformers and safetensors
# (.ci/run installs them), ./train_gpt_cpu, ./tokenize, test/hf_forward, ./train_gpt_emu where the CUDA
# headers are, and the GPT-2 tokenizer files and Tiny Shakespeare in DATA (default ../shared/data).
source "$(dirname "$0")/lib.sh"  # the repo root, $TORCH_PY, the scratch directory $W
DATA=${1:-${DATA_DIR:-../shared/data}}
hf_start "Hugging Face export/import"
emu=()
[ -x ./train_gpt_emu ] && emu=(--emu ./train_gpt_emu)
"$TORCH_PY" test/test_hf.py --work "$W" --data "$DATA" "${emu[@]}"
