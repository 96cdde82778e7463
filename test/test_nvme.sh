#!/usr/bin/env bash
# test_nvme.sh: --offload-device nvme (ZeRO-Infinity: AdamW's state and the master weights in a swap file,
# zero/swap.h). Against the same runs without offload: ZeRO 0-3, --offload params and --pp 2 on 2 ranks train
# bit-identically and save byte-identical checkpoints, which resume with and without offload on other world
# sizes; the swap files are private to a run and gone when it ends; a missing, read-only, full or too-small
# --nvme-path, a short read and an I/O error each stop the run naming the path, the operation and the cause,
# and leave the last checkpoint loadable; the memory plan's advice, followed, fits.
source "$(dirname "$0")/lib.sh"
have_mpi "NVMe offload" || { finish; exit; }

losses_of() { grep -o '"loss": [0-9.e-]*, "lr": [0-9.e-]*, "norm": [0-9.e-]*' "$1"; }  # step by step, with lr and norm
same_run() {  # same_run A B: the logs' losses, lr and norms, and the step-6 checkpoints, bit for bit
  [ -s "$1.jsonl" ] && [ "$(losses_of "$1.jsonl")" = "$(losses_of "$2.jsonl")" ] \
    && cmp -s "$1/model_00000006.bin" "$2/model_00000006.bin" && cmp -s "$1/state_00000006.bin" "$2/state_00000006.bin"
}
# compare_losses A.jsonl B.jsonl FIRST: steps from FIRST on within 1e-5 (other layouts sum in another order)
compare_losses() { $PY - "$@" <<'PYEOF'
import json, sys
def load(p):
    return {d["step"]: (d["loss"], d["norm"]) for d in map(json.loads, open(p)) if "loss" in d}
a, b = load(sys.argv[1]), load(sys.argv[2])
steps = [s for s in a if s >= int(sys.argv[3])]
if not steps or any(s not in b for s in steps): print("missing steps"); sys.exit(1)
err = max(max(abs(a[s][i] - b[s][i]) / abs(a[s][i]) for i in (0, 1)) for s in steps)
print(f"{len(steps)} losses and norms, max relative difference {err:.2e}")
sys.exit(0 if err < 1e-5 else 1)
PYEOF
}
NV=(--offload-device nvme --nvme-path "$W/disk" --nvme-buffer-mb 0.05)  # 0.05 MB buffers: ~130 records, many per unit
mkdir -p "$W/disk"
run2() { "${MPI[@]}" -np 2 $BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 2 -n 3 "$@"; }

# every ZeRO stage on 2 ranks, offload params, and a pipeline: against the same run without offload
for z in 0 1 2 3; do
  run2 -z $z -o "$W/no$z" --log "$W/no$z.jsonl" > /dev/null 2>&1
  run2 -z $z --offload optimizer "${NV[@]}" -o "$W/nv$z" --log "$W/nv$z.jsonl" > "$W/nv$z.out" 2>&1
  same_run "$W/nv$z" "$W/no$z" && grep -q "offload to nvme: rank 0's swap file $W/disk/train_gpt.swap" "$W/nv$z.out" \
    && ok "ZeRO-$z, 2 ranks, --offload optimizer to nvme: losses, lr, norms and checkpoints bit-identical to no offload" \
    || bad "nvme offload at ZeRO-$z" "$(tail -3 "$W/nv$z.out")"
done
run2 -z 3 --offload params "${NV[@]}" -o "$W/nvp" --log "$W/nvp.jsonl" > "$W/nvp.out" 2>&1
same_run "$W/nvp" "$W/no3" && ok "ZeRO-3, 2 ranks, --offload params to nvme (layer shards read from disk for each gather): bit-identical" \
  || bad "nvme offload params" "$(tail -3 "$W/nvp.out")"
run2 --grad-accum 4 --pp 2 -z 1 -o "$W/pp" --log "$W/pp.jsonl" > /dev/null 2>&1
run2 --grad-accum 4 --pp 2 -z 1 --offload optimizer "${NV[@]}" -o "$W/nvpp" --log "$W/nvpp.jsonl" > "$W/nvpp.out" 2>&1
same_run "$W/nvpp" "$W/pp" && ok "--pp 2 (ZeRO-1), --offload optimizer to nvme: bit-identical to the pipeline without offload" \
  || bad "nvme offload with --pp 2" "$(tail -3 "$W/nvpp.out")"
# the log says what went to and from the disk: a step ends with its update, which reads and writes the whole swap
# file once; every step has its own, the one after a checkpoint too (a checkpoint reads the swap file, it runs no
# update: before issue 30, steps 1 and 4 had none, step 3's update run by the checkpoint after it)
r=$($PY - "$W/nv1.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
size = [r["allocated"] for r in rows if "allocated" in r][0]["swap_file_bytes"]
steps = [r for r in rows if "loss" in r]
busy = [s["step"] for s in steps if s["nvme"]["read_bytes"]]
ok = busy == [1, 2, 3, 4, 5, 6] and all(s["nvme"]["read_bytes"] == s["nvme"]["write_bytes"] and 0 <= s["nvme"]["wait_ms"] <= s["ms"]
                                   and s["nvme"]["read_bytes"] in (0, size) for s in steps)
ok &= all(abs(sum(s["time_ms"].values()) - s["ms"]) <= 0.01 * s["ms"] + 0.05 for s in steps)
print(f"{len(steps)} steps, steps {busy} each read and wrote {size} bytes (the swap file), waited {max(s['nvme']['wait_ms'] for s in steps):.1f} ms at most; time_ms adds up to ms")
sys.exit(0 if ok and steps else 1)
PYEOF
) && ok "ZeRO-1 log: $r" || bad "nvme figures in the log" "$r"

# checkpoints cross: one written with nvme offload by 2 ranks at ZeRO-2 resumes in 1 process without offload,
# and one written by 1 process without offload resumes with nvme offload params at ZeRO-3, bit-identically
$BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -n 3 -o "$W/one" --log "$W/one.jsonl" > /dev/null 2>&1
mkdir -p "$W/r1" "$W/r2"
cp "$W/nv2/model_00000003.bin" "$W/nv2/state_00000003.bin" "$W/r1/"
$BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -o "$W/r1" -y 1 --log "$W/r1.jsonl" > "$W/r1.out" 2>&1
r=$(compare_losses "$W/one.jsonl" "$W/r1.jsonl" 4) && grep -q "resume: step 3" "$W/r1.out" \
  && ok "saved with nvme offload by 2 ranks at ZeRO-2, resumed by 1 process without offload: steps 4-6 $r" || bad "nvme checkpoint resumed without offload" "$r"
# (ZeRO-3 in one process sums in another order than ZeRO-0, so the reference is ZeRO-3 without offload)
mkdir -p "$W/r3"
cp "$W/one/model_00000003.bin" "$W/one/state_00000003.bin" "$W/r2/"
cp "$W/one/model_00000003.bin" "$W/one/state_00000003.bin" "$W/r3/"
$BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -z 3 -n 3 -o "$W/r3" -y 1 --log "$W/r3.jsonl" > /dev/null 2>&1
$BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -z 3 -n 3 --offload params "${NV[@]}" -o "$W/r2" -y 1 --log "$W/r2.jsonl" > "$W/r2.out" 2>&1
[ -s "$W/r2.jsonl" ] && [ "$(losses_of "$W/r3.jsonl")" = "$(losses_of "$W/r2.jsonl")" ] && cmp -s "$W/r3/state_00000006.bin" "$W/r2/state_00000006.bin" \
  && cmp -s "$W/r3/model_00000006.bin" "$W/r2/model_00000006.bin" \
  && ok "saved by 1 process without offload, resumed at ZeRO-3 with --offload params to nvme: steps 4-6 and the final checkpoint bit-identical to the resume without offload" \
  || bad "resume with nvme offload" "$(tail -3 "$W/r2.out")"

# scratch files: two runs at once on one --nvme-path, each bit-identical to its run without offload; while a
# run stalls (TRAIN_GPT_FAULT=stall) its swap file is open but already unlinked, and the directory stays empty
TRAIN_GPT_FAULT=stall:0:3:2 $BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -n 3 --offload optimizer "${NV[@]}" -o "$W/c1" \
  --log "$W/c1.jsonl" > "$W/c1.out" 2>&1 &
pid=$!
# until the stall (up to 60 s: a busy machine may take more than the 5 s this once allowed to reach step 3)
for _ in $(seq 1200); do grep -q "stalls at step 3" "$W/c1.out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
open_swap=$(ls -l /proc/$pid/fd 2>/dev/null | grep -c "$W/disk/train_gpt.swap.$pid.0.[0-9a-f]* (deleted)")
listed=$(ls -A "$W/disk" | wc -l)
run2 -z 1 --offload optimizer "${NV[@]}" -o "$W/c2" --log "$W/c2.jsonl" > "$W/c2.out" 2>&1
wait $pid
same_run "$W/c1" "$W/one" && same_run "$W/c2" "$W/no1" \
  && ok "two runs at once on one --nvme-path (1 process and 2 ranks): both bit-identical to their runs without offload" \
  || bad "concurrent runs on one --nvme-path" "$(tail -2 "$W/c1.out") $(tail -2 "$W/c2.out")"
[ "$open_swap" = 1 ] && [ "$listed" = 0 ] && [ -z "$(ls -A "$W/disk")" ] \
  && ok "mid-run the swap file is open but unlinked (nothing in the directory to leak); after the runs the directory is empty" \
  || bad "swap file scratch" "open and deleted: $open_swap, listed mid-run: $listed, after: $(ls -A "$W/disk")"

# a file system without O_DIRECT (TRAIN_GPT_FAULT=nvme-nodirect stands for one: this kernel's tmpfs has it):
# buffered I/O, said in a note, the same numbers
TRAIN_GPT_FAULT=nvme-nodirect $BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -n 3 --offload optimizer "${NV[@]}" -o "$W/nd" \
  --log "$W/nd.jsonl" > "$W/nd.out" 2>&1
same_run "$W/nd" "$W/one" && grep -qF "note: $W/disk does not allow O_DIRECT: buffered I/O through the page cache" "$W/nd.out" \
  && grep -q "| buffered, io_uring |" "$W/nd.out" && ok "without O_DIRECT: a note, buffered I/O, bit-identical to no offload" \
  || bad "fallback without O_DIRECT" "$(tail -3 "$W/nd.out")"

# faults: each stops the run naming the path, the operation and the cause
one=($BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 --offload optimizer --offload-device nvme)
out=$("${one[@]}" --nvme-path "$W/missing" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF "error: --nvme-path $W/missing: cannot use it for the swap file: No such file or directory" <<<"$out" \
  && ok "a missing --nvme-path stops the run, naming it" || bad "missing --nvme-path" "$out"
out=$("${one[@]}" 2>&1); rc=$?
out2=$($BIN -e d2 --offload-device nvme --nvme-path "$W/disk" 2>&1); rc2=$?
[ $rc -eq 2 ] && [ $rc2 -eq 2 ] && grep -qF -- "--offload-device nvme: needs --nvme-path DIR" <<<"$out" \
  && grep -qF -- "--offload-device nvme: needs --offload optimizer or --offload params" <<<"$out2" \
  && ok "--offload-device nvme without --nvme-path, or without --offload, is refused up front" || bad "nvme flags" "$out $out2"
# a size limit (ulimit -f) below the swap file: the file cannot be made that large
out=$(ulimit -f 1000; "${one[@]}" --nvme-path "$W/disk" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qE "error: --nvme-path $W/disk: allocate [0-9]+ bytes .* for swap file $W/disk/train_gpt.swap.[0-9]+.0.[0-9a-f]+: File too large" <<<"$out" \
  && ok "a file size limit below the swap file (ulimit -f): stops at start with the path, 'allocate' and 'File too large'" || bad "ulimit -f" "$out"
# a read-only and a full file system: tmpfs mounts in a private mount namespace (root, as CI runs)
if [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null; then
  mkdir -p "$W/ro" "$W/small"
  out=$(unshare -m bash -c "mount -t tmpfs -o ro,size=1m none '$W/ro' && $(printf '%q ' "${one[@]}") --nvme-path '$W/ro'" 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -qE "error: --nvme-path $W/ro: create swap file $W/ro/train_gpt.swap.[0-9]+.0.[0-9a-f]+: Read-only file system" <<<"$out" \
    && ok "a read-only --nvme-path: stops with the path, 'create' and 'Read-only file system'" || bad "read-only --nvme-path" "$out"
  out=$(unshare -m bash -c "mount -t tmpfs -o size=256k none '$W/small' && $(printf '%q ' "${one[@]}") --nvme-path '$W/small'" 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -qE "error: --nvme-path $W/small: allocate [0-9]+ bytes .*: No space left on device \(free there: 0.00 GiB\)" <<<"$out" \
    && ok "a full --nvme-path (a 256 KiB tmpfs): stops at start with the path, 'allocate', 'No space left on device' and the free space" \
    || bad "full --nvme-path" "$out"
else
  bad "read-only and full --nvme-path need root and unshare -m (mount namespaces) to mount a small tmpfs"
  bad "(the same)"
fi
# a short read (the file truncated under the run) at step 4, and an I/O error at step 3: the run stops, the
# checkpoint of step 2 stays whole and resumes without offload exactly where the run without faults was
TRAIN_GPT_FAULT=nvme-short:4 "${one[@]}" --nvme-path "$W/disk" -n 2 -o "$W/short" > "$W/short.out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -qE "error: --offload-device nvme: short read of swap file $W/disk/train_gpt.swap.[0-9]+.0.[0-9a-f]+: [0-9]+ of [0-9]+ bytes at offset [0-9]+ \(record [0-9]+\): the file is shorter than written" "$W/short.out" \
  && ok "a short read of the swap file stops the run with the path, 'short read', the bytes and the offset" || bad "short read" "$(tail -3 "$W/short.out")"
$BIN -e d2 -b 2 -t 32 -x 6 -v 0 -s 0 --grad-accum 4 -o "$W/short" -y 1 --log "$W/short.jsonl" > /dev/null 2>&1
[ "$(ls "$W/short" | grep -c tmp)" = 0 ] && [ "$(losses_of "$W/one.jsonl" | tail -n 4)" = "$(losses_of "$W/short.jsonl")" ] \
  && ok "after the short read, the last checkpoint (step 2) resumes without offload: steps 3-6 bit-identical" || bad "checkpoint after a fault" "$(ls "$W/short")"
TRAIN_GPT_FAULT=nvme-eio:3 "${one[@]}" --nvme-path "$W/disk" > "$W/eio.out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -qE "error: --offload-device nvme: read [0-9]+ bytes at offset [0-9]+ of swap file $W/disk/train_gpt.swap.[0-9]+.0.[0-9a-f]+ \(record [0-9]+\): Input/output error" "$W/eio.out" \
  && [ -z "$(ls -A "$W/disk")" ] && ok "an I/O error on a read stops the run with the operation, the path and the cause; no swap file is left" \
  || bad "I/O error" "$(tail -3 "$W/eio.out")"

# the memory plan against the machine (--mem-limit pretends a machine of that much memory per rank): d12 at
# 1.5 GiB does not fit without offload, nor with AdamW in host memory (in the CPU build that is the same
# memory); the advice names nvme, and that configuration fits
advice() { $PY -c 'import json,sys; p=json.loads(open(sys.argv[1]).readline())["memory_plan"]; print(p["fits"], p["device_bytes"], p["host_bytes"], p["disk_bytes"])' "$1"; }
$BIN -e d12 --dry-run --mem-limit 1.5 --log "$W/plan1.jsonl" > "$W/plan1.out" 2>&1
adv=$(sed -n 's/.*"advice": "\(.*\)"}}/\1/p' "$W/plan1.jsonl" | sed "s|DIR|$W/disk|")
$BIN -e d12 --dry-run --mem-limit 1.5 $adv --log "$W/plan2.jsonl" > "$W/plan2.out" 2>&1
set -- $(advice "$W/plan1.jsonl") $(advice "$W/plan2.jsonl")
[ "$1" = False ] && [ "$5" = True ] && grep -q "offload-device nvme" <<<"$adv" && grep -qF "would with $adv" <<<"$(sed "s|DIR|$W/disk|" "$W/plan1.out")" \
  && ok "d12 in 1.5 GiB: the plan says it does not fit ($(( $2 / 1048576 )) MiB) and advises '$adv', which fits: device $(( $6 / 1048576 )) MiB + ring $(( $7 / 1048576 )) MiB, disk $(( $8 / 1048576 )) MiB" \
  || bad "memory advice, 1 process" "$(tail -3 "$W/plan1.out") / $(tail -2 "$W/plan2.out")"
"${MPI[@]}" -np 2 $BIN -e d12 --dry-run --mem-limit 1.4 --log "$W/plan3.jsonl" > "$W/plan3.out" 2>&1
adv=$(sed -n 's/.*"advice": "\(.*\)"}}/\1/p' "$W/plan3.jsonl")
"${MPI[@]}" -np 2 $BIN -e d12 --dry-run --mem-limit 1.4 $adv --log "$W/plan4.jsonl" > "$W/plan4.out" 2>&1
set -- $(advice "$W/plan3.jsonl") $(advice "$W/plan4.jsonl")
[ "$1" = False ] && [ "$5" = True ] && grep -q -- "-z [123] --offload none" <<<"$adv" \
  && ok "d12 on 2 ranks in 1.4 GiB each: the plan advises a ZeRO stage before any offload ('$adv'), and it fits" \
  || bad "memory advice, 2 ranks" "$adv $(tail -3 "$W/plan3.out")"
# the plan is exact: what a run allocates and the swap file it makes are what the plan said
r=$($PY -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if "allocated" in l][0]["allocated"]
print(a["swap_file_bytes"], a["planned_disk_bytes"], a["model_state_bytes"], a["planned_model_state_bytes"])
ok = a["swap_file_bytes"] == a["planned_disk_bytes"] > 0 and a["model_state_bytes"] == a["planned_model_state_bytes"]
sys.exit(0 if ok else 1)' "$W/nvp.jsonl") && ok "ZeRO-3 offload params to nvme allocates what the plan says (swap file, planned; device state, planned): $r" \
  || bad "plan vs allocation with nvme" "$r"
finish
