#!/usr/bin/env bash
# lm-evaluation-harness on a model of ours, with a multiple-choice set of our own as a local task in the
# harness's YAML form (no network: HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1).
#   scripts/lm_eval.sh MODEL SET.jsonl OUT_DIR [extra lm_eval flags...]
# MODEL: an exported Hugging Face directory (scripts/export_hf.py), or an llm.c model file or out dir, which is
# exported first into OUT_DIR/hf. SET.jsonl: text examples {"context": ..., "endings": [...], "label": k} (the
# form scripts/mc_tokenize.py reads; endings are appended to the context as they are, so give them their
# leading space). The task is written to OUT_DIR/task/llmc_mc.yaml, the harness's results under OUT_DIR/results,
# and the task's acc and acc_norm (the harness's: by the ending's characters) are printed.
# Needs lm-eval, transformers and torch in python3 (PYTHON overrides it; .ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: scripts/lm_eval.sh MODEL SET.jsonl OUT_DIR [lm_eval flags...]" >&2; exit 2; }
MODEL=$1; SET=$2; OUT=$3; shift 3
PY=${PYTHON:-python3}
# before anything is exported or written: a Python without the harness is one line naming it, not a traceback
missing=$("$PY" -c 'import importlib.util as u; print(" ".join(m for m in ("lm_eval", "transformers", "torch") if u.find_spec(m) is None))' 2>/dev/null) \
  || { echo "error: scripts/lm_eval.sh: cannot run $PY (PYTHON names a Python with lm-eval, transformers and torch)" >&2; exit 1; }
if [ -n "$missing" ]; then
  echo "error: scripts/lm_eval.sh needs lm-eval, transformers and torch in $PY, which lacks: $missing (the pip install" \
    "line in .ci/run installs them; PYTHON names another Python, e.g. PYTHON=/usr/bin/python3)" >&2
  exit 1
fi
[ -f "$SET" ] || { echo "error: $SET: no such file (expected a JSON-lines multiple-choice set)" >&2; exit 1; }
mkdir -p "$OUT/task"
if [ -f "$MODEL/config.json" ]; then HF=$MODEL
else HF=$OUT/hf; "$PY" scripts/export_hf.py "$MODEL" "$HF" --overwrite; fi
cat > "$OUT/task/llmc_mc.yaml" <<YAML
task: llmc_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: $(realpath "$SET")
test_split: test
output_type: multiple_choice
doc_to_text: "{{context}}"
doc_to_choice: "{{endings}}"
doc_to_target: "{{label}}"
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
YAML
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$PY" -m lm_eval --model hf --model_args "pretrained=$(realpath "$HF"),dtype=float32" --tasks llmc_mc \
  --include_path "$OUT/task" --device cpu --batch_size 1 --output_path "$OUT/results" --log_samples "$@"
