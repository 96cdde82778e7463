#!/usr/bin/env bash
# same_numbers.sh OLD_BIN NEW_BIN: evidence that a refactor changed no number. Runs both binaries at
# several configurations and compares, byte for byte: the JSON logs with the timing fields removed, the
# console output with timings removed, and every checkpoint file. Prints one line per configuration;
# exits 1 on any difference. Timing fields are the only ones a rerun may change.
#   CPU build (train_gpt_cpu): one process, resume, loss scaling with injected overflows, ZeRO 0-3,
#     --pp 2 (and x 2 ranks), --offload optimizer to cpu and to nvme, --offload params at ZeRO-3 under
#     mpirun, real token shards when ../shared/data is there.
#   CUDA build (train_gpt or the emulated train_gpt_emu, told apart by --help): fp32, bf16 and fp16 (with a
#     real overflow), ZeRO 0-3 over NCCL, --pp 2, the same offloads; tiny models, a few steps each.
#   Both builds: the Llama family too, a fresh llama-d2 (grouped-query 2:1, tied) and test/llama_model.py's file
#     (grouped-query 4:1, QK-norm, untied, q/k/v bias), with recompute, resume, ZeRO-3 and --pp 2.
# Every run validates and samples too. E.g. dev/same_numbers.sh /work/base/train_gpt_emu ./train_gpt_emu
set -u
OLD=$(realpath "$1"); NEW=$(realpath "$2")
cd "$(dirname "$0")/.."
W=$(mktemp -d /tmp/same_numbers.XXXXXX)
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
MPI=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1)
fail=0
strip_log() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    for k in ("ms", "tokens_per_s", "flops_per_s", "mfu", "peak_rss_mib", "peak_device_mib", "bubble", "eta_s", "time_ms", "comm_ms"):
        d.pop(k, None)
    for k in ("ram_per_rank_bytes", "disk_free_per_rank_bytes"):  # free memory and disk when it started
        d.get("memory_plan", {}).pop(k, None)
    d.get("nvme", {}).pop("wait_ms", None)
    d.get("allocated", {}).pop("ranks", None)  # every rank allocation, logged since issue 41 (rank 0 figures stay compared)
    print(json.dumps(d, sort_keys=True))
' "$1"; }
# (the checkpoint line, which named only the state file before issue 44, is compared by that file; the plan's
# "AdamW state", named "optimizer state" since issue 52's optimizer boundary, by its number)
strip_out() { sed -E -e 's/\| (Muon \+ |Adafactor )?(AdamW )?(optimizer )?state /| optimizer state /' -e 's/[0-9.]+ ms(\/step)?|[0-9]+ tok\/s|[0-9.]+ GFLOP\/s|MFU [0-9.]+%|RSS [0-9]+ MiB|ETA ([0-9.]+[smhd])+|(available|free) [0-9.]+ per rank|train_gpt\.swap\.[0-9a-f.]+|bubble [0-9.\/]+|\/tmp\/same_numbers[^ ]*\/(old|new)//g' \
                    -e 's/^checkpoint: .* and (.*state_[0-9]+\.bin)$/checkpoint: \1/' "$1"; }
# same NAME LAUNCH... -- FLAGS...: run both binaries with FLAGS (plus -o and --log), compare
same() {
  local name=$1; shift
  local launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  for v in old new; do
    local bin=$OLD; [ $v = new ] && bin=$NEW
    mkdir -p "$W/$v/$name"
    "${launch[@]}" "$bin" "$@" -o "$W/$v/$name/ck" --log "$W/$v/$name/log.jsonl" > "$W/$v/$name/out" 2>&1
    echo $? > "$W/$v/$name/rc"
  done
  local why=""
  cmp -s "$W/old/$name/rc" "$W/new/$name/rc" || why="$why exit status"
  [ "$(cat "$W/old/$name/rc")" = 0 ] || why="$why (old run failed: $(tail -1 "$W/old/$name/out"))"
  [ "$(strip_log "$W/old/$name/log.jsonl")" = "$(strip_log "$W/new/$name/log.jsonl")" ] || why="$why log"
  [ "$(strip_out "$W/old/$name/out")" = "$(strip_out "$W/new/$name/out")" ] || why="$why console"
  local files=0
  for f in "$W/old/$name/ck"/*; do
    [ -e "$f" ] || continue
    files=$((files + 1))
    cmp -s "$f" "$W/new/$name/ck/$(basename "$f")" || why="$why $(basename "$f")"
  done
  [ "$(ls "$W/old/$name/ck" 2>/dev/null)" = "$(ls "$W/new/$name/ck" 2>/dev/null)" ] || why="$why file-list"
  if [ -z "$why" ]; then echo "SAME $name: log ($(wc -l < "$W/new/$name/log.jsonl") lines), console, $files checkpoint files"
  else echo "DIFFERENT $name:$why"; diff <(strip_out "$W/old/$name/out") <(strip_out "$W/new/$name/out") | head -5; fail=1; fi
}
resume_from() {  # copy checkpoint STEP of run NAME into run NAME2's out dir, for both binaries
  for v in old new; do mkdir -p "$W/$v/$3/ck"; cp "$W/$v/$1/ck/model_$(printf %08d $2).bin" "$W/$v/$1/ck/state_$(printf %08d $2).bin" "$W/$v/$3/ck/"; done
}
# the Llama family: llama-d2 and a 4:1 model with every option on (QK-norm, untied, bias), each sampling through the
# key/value cache; PREFIX: flags every run gets (the CUDA build's precision)
python3 test/llama_model.py "$W/gqa41.bin" 4 1 || { echo "DIFFERENT llama: test/llama_model.py failed"; exit 1; }
llama_same() {
  local tag=$1; shift
  local l1=(-e llama-d2 -b 2 -t 32 -x 6 -v 3 -m 2 -s 3 -g 8 -n 3 --keep-checkpoints 5)
  local l2=(-e "$W/gqa41.bin" -b 2 -t 32 --grad-accum 2 -r 2 -x 6 -v 3 -m 2 -s 3 -g 8 -n 3 --keep-checkpoints 5)
  same llama-d2$tag -- "$@" "${l1[@]}"
  same llama-gqa41-qknorm-untied-bias$tag -- "$@" "${l2[@]}"
  resume_from llama-gqa41-qknorm-untied-bias$tag 3 llama-resumed$tag
  same llama-resumed$tag -- "$@" "${l2[@]}" -y 1
  if command -v mpirun >/dev/null; then
    same llama-np2-zero3$tag "${MPI[@]}" -np 2 -- "$@" "${l2[@]}" -z 3
    same llama-pp2$tag "${MPI[@]}" -np 2 -- "$@" "${l2[@]}" --pp 2
  fi
}
if "$NEW" --help 2>&1 | grep -q "^this binary: cuda build"; then
  llama_same -fp32 --precision fp32
  llama_same -bf16 --precision bf16
  # the CUDA build: 2 layers, T = 32, four steps; validation and an 8-token sample at steps 2 and 4
  mkdir -p "$W/disk"
  g=(-e d2 -b 2 -t 32 -x 4 -v 2 -m 2 -s 2 -g 8 -n 2 --keep-checkpoints 5)
  for p in fp32 bf16 fp16; do same $p -- --precision $p "${g[@]}" --grad-accum 2; done
  # fp16 from a loss scale of 2^20: the backward of step 2 overflows (infinite gradients), skipped, scale halved
  same fp16-overflow -- --precision fp16 "${g[@]}" --loss-scale-power 20 --loss-scale-hysteresis 1
  resume_from bf16 2 bf16-resumed
  same bf16-resumed -- --precision bf16 "${g[@]}" --grad-accum 2 -y 1
  if command -v mpirun >/dev/null; then
    for z in 0 1 2 3; do same np2-zero$z-nccl "${MPI[@]}" -np 2 -- --precision bf16 "${g[@]}" -z $z --comm nccl; done
    same pp2 "${MPI[@]}" -np 2 -- --precision bf16 "${g[@]}" --grad-accum 2 --pp 2
    same np2-offload-cpu "${MPI[@]}" -np 2 -- --precision bf16 "${g[@]}" -z 1 --offload optimizer
    same np2-offload-nvme "${MPI[@]}" -np 2 -- --precision bf16 "${g[@]}" -z 1 --offload optimizer --offload-device nvme \
      --nvme-path "$W/disk" --nvme-buffer-mb 0.05
    same np2-offload-params "${MPI[@]}" -np 2 -- --precision bf16 "${g[@]}" -z 3 --offload params
  else
    echo "SKIP the mpirun configurations: mpirun is not on the PATH"
  fi
  exit $fail
fi
same default -- -x 40 -v 20 -s 20 -n 20
llama_same ""
same accum-recompute -- -e d2 -b 4 -t 32 --grad-accum 2 -r 2 -x 12 -v 4 -s 6 -n 4 --keep-checkpoints 5
resume_from accum-recompute 4 resumed
same resumed -- -e d2 -b 4 -t 32 --grad-accum 2 -r 2 -x 12 -v 4 -s 6 -n 4 --keep-checkpoints 5 -y 1
same loss-scale-overflow env TRAIN_GPT_FAULT=overflow:3,4,8 -- -e d2 -b 4 -t 32 -x 12 -v 6 -s 0 -n 6 --loss-scale dynamic --loss-scale-window 3
if command -v mpirun >/dev/null; then
  for z in 0 1 2; do same np2-zero$z "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 --grad-accum 2 -x 10 -v 5 -s 5 -n 5 -z $z; done
  same np2-zero3 "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 --grad-accum 2 -x 10 -v 5 -s 5 -n 5 -z 3 --reduce-bucket-mb 1
  mkdir -p "$W/disk"
  same np2-offload-cpu "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 -x 6 -v 3 -s 3 -n 3 -z 1 --offload optimizer
  same np2-offload-nvme "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 -x 6 -v 3 -s 3 -n 3 -z 1 --offload optimizer --offload-device nvme \
    --nvme-path "$W/disk" --nvme-buffer-mb 0.05
  same np2-offload-params "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 -x 6 -v 3 -s 3 -n 3 -z 3 --offload params
  same pp2 "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 --grad-accum 4 -x 10 -v 5 -s 5 -n 5 --pp 2
  same pp2-dp2-zero1 "${MPI[@]}" -np 4 -- -e d4 -b 2 -t 32 --grad-accum 3 -x 8 -v 4 -s 8 -n 8 --pp 2 -z 1
else
  echo "SKIP the mpirun configurations: mpirun is not on the PATH"
fi
DATA=${DATA_DIR:-../shared/data}
if [ -f "$DATA/tinyshakespeare.txt" ] && [ -x ./tokenize ]; then
  ./tokenize shards --encoder "$DATA/gpt2_encoder.json" --merges "$DATA/gpt2_vocab.bpe" --in "$DATA/tinyshakespeare.txt" \
    --out-dir "$W/ts" > /dev/null
  same shakespeare -- -i "$W/ts/train_*.bin" -j "$W/ts/val_*.bin" -e d2 -b 4 -t 64 -x 10 -v 5 -s 10 -g 16 -n 10
fi
exit $fail
