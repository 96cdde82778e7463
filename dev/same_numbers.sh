#!/usr/bin/env bash
# same_numbers.sh OLD_BIN NEW_BIN: evidence that a refactor of the CPU build changed no number. Runs
# both binaries at several configurations (one process, resume, ZeRO-1/3 and --pp under mpirun,
# loss scaling with injected overflows, real token shards when ../shared/data is there) and
# compares, byte for byte: the JSON logs with the timing fields removed, the console output with
# timings removed, and every checkpoint file. Prints one line per configuration; exits 1 on any
# difference. Timing fields (the ETA, the step's time breakdown and the disk's wait among them), the RAM
# and disk free now, and the swap file's unique name are the only ones a rerun may change.
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
    for k in ("ms", "tokens_per_s", "flops_per_s", "peak_rss_mib", "peak_device_mib", "bubble", "eta_s", "time_ms"):
        d.pop(k, None)
    for k in ("ram_per_rank_bytes", "disk_free_per_rank_bytes"):  # RAM and disk free, as the machine has them now
        d.get("memory_plan", {}).pop(k, None)
    d.get("nvme", {}).pop("wait_ms", None)
    print(json.dumps(d, sort_keys=True))
' "$1"; }
strip_out() { sed -E 's/ETA [0-9.smhd]+|available [0-9.]+|free [0-9.]+ per rank|wait [0-9.]+ ms|train_gpt\.swap\.[0-9a-f.]+|[0-9.]+ ms(\/step)?|[0-9]+ tok\/s|[0-9.]+ GFLOP\/s|RSS [0-9]+ MiB|bubble [0-9.\/]+|\/tmp\/same_numbers[^ ]*\/(old|new)//g' "$1"; }
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
same default -- -x 40 -v 20 -s 20 -n 20
same accum-recompute -- -e d2 -b 4 -t 32 --grad-accum 2 -r 2 -x 12 -v 4 -s 6 -n 4 --keep-checkpoints 5
resume_from accum-recompute 4 resumed
same resumed -- -e d2 -b 4 -t 32 --grad-accum 2 -r 2 -x 12 -v 4 -s 6 -n 4 --keep-checkpoints 5 -y 1
same loss-scale-overflow env TRAIN_GPT_FAULT=overflow:3,4,8 -- -e d2 -b 4 -t 32 -x 12 -v 6 -s 0 -n 6 --loss-scale dynamic --loss-scale-window 3
if command -v mpirun >/dev/null; then
  same np2-zero1 "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 --grad-accum 2 -x 10 -v 5 -s 5 -n 5 -z 1
  same np2-zero3 "${MPI[@]}" -np 2 -- -e d2 -b 4 -t 32 --grad-accum 2 -x 10 -v 5 -s 5 -n 5 -z 3 --reduce-bucket-mb 1
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
