#!/usr/bin/env bash
# test_hf.sh: Hugging Face export and import (scripts/export_hf.py, scripts/import_hf.py) against
# transformers, the trainer's own forward and sampler (test/hf_forward) and both builds; the checks are
# in test/test_hf.py. Needs Debian's python with torch (TORCH_PYTHON) plus transformers and safetensors
# (.ci/run installs them), ./train_gpt_cpu, ./tokenize, test/hf_forward, ./train_gpt_emu where the CUDA
# headers are, and the GPT-2 tokenizer files and Tiny Shakespeare in DATA (default ../shared/data).
set -u
cd "$(dirname "$0")/.."
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
DATA=${1:-${DATA_DIR:-../shared/data}}
for m in torch transformers safetensors; do
  if ! "$TORCH_PY" -c "import $m" 2>/dev/null; then
    echo "SKIP Hugging Face export/import: $TORCH_PY cannot import $m (.ci/run shows the pip install line)"
    echo "0 passed, 0 failed, 1 skipped"; exit 0
  fi
done
W=$(mktemp -d /tmp/test_hf.XXXXXX)
trap 'rm -rf "$W"' EXIT
emu=()
[ -x ./train_gpt_emu ] && emu=(--emu ./train_gpt_emu)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$TORCH_PY" test/test_hf.py --work "$W" --data "$DATA" "${emu[@]}"
