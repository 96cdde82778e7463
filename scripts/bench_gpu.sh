#!/usr/bin/env bash
# bench_gpu.sh (make bench): GPT-2 124M (d12), T=1024, bf16 on one GPU, three programs in one run at the same
# model, micro-batch and precision: this trainer, PyTorch (bf16 autocast, torch.compile, SDPA:
# dev/bench_pytorch.py) and llm.c's train_gpt2cu, built from the checkout that LLMC_DIR points at. Two
# configurations: one micro-batch per step (B=16), and llm.c's GPT-2 124M recipe, 0.5M tokens per step by
# gradient accumulation (32 x 16 x 1024), where the optimizer's cost is amortised. Then where the time goes,
# kernel by kernel (./dev/cuda/kernels bench), and attention's TFLOP/s (./dev/cuda/attention bench) beside PyTorch's
# scaled_dot_product_attention at the same shapes (dev/bench_sdpa.py). The Llama family at the same width: this
# trainer's `-e llama-d12` (C 768, L 12, NH 12, KV 3: grouped-query 4:1, head 64, SwiGLU 2048, tied head) beside
# transformers' LlamaForCausalLM of the same shape and parameter count, compiled (dev/bench_pytorch.py --llama),
# B=16 T=1024 bf16, one micro-batch. Output goes to stdout and to dev/bench/bench_gpu_<gpu>.txt.
#
#   make bench [LLMC_DIR=~/llm.c] [CUDNN_FRONTEND_PATH=~/cudnn-frontend/include] [STEPS=20] [ACCUM_STEPS=8]
#   TP=2 [SP=0|1] bash scripts/bench_gpu.sh rows1 llama   # train_gpt's rows at tensor parallelism (see TP below)
#   bash scripts/bench_gpu.sh [--append] [rows1] [rows32] [llama] [kernels] [attention]   # some parts (default: all)
#
# rows1: the three programs at one micro-batch; rows32: at the 0.5M-token recipe; llama: train_gpt and PyTorch on
# the Llama of d12 width; --append adds to the file rather than starting it. dev/gpu_session.sh runs the parts as
# steps of their own and sets:
#   BENCH_NO_BUILD=1   the binaries are there already (no make)
#   BENCH_SHARD=path   the random shard made once (dev/rand_shard.py), else one is made here (~10 s)
#   LLMC_BIN=path      a prebuilt train_gpt2cu (BUILD.txt beside it says which llm.c); if it fails, and LLMC_DIR is
#                      set, llm.c is built here and run again
#   BENCH_LIMIT_TRAIN_GPT, BENCH_LIMIT_PYTORCH, BENCH_LIMIT_LLMC, BENCH_LIMIT_LLMC_BUILD: seconds each run (or the
#                      build) may take before it is stopped and its row says so (defaults 120, 300, 180, 300)
#   TP=N [SP=0|1]      train_gpt's rows on N GPUs under mpirun (MPIRUN: the launcher and its flags, default mpirun),
#                      train_gpt --tp N [--sp SP], the same tokens per step; their MFU is over N GPUs' peak. PyTorch's
#                      and llm.c's rows stay on one GPU
# and for a rehearsal without a GPU (the llama part at a tiny shape on the CPU build, PyTorch on the CPU; no MFU,
# PyTorch eager where it has no torch.compile):
#   BENCH_TRAIN_GPT=./train_gpt_cpu BENCH_DEVICE=cpu BENCH_B=2 BENCH_T=64 BENCH_LLAMA_DEPTH=2 STEPS=5
#   BENCH_OUT=/tmp/bench.txt BENCH_NO_BUILD=1 TORCH_PYTHON=/usr/bin/python3 bash scripts/bench_gpu.sh llama
#
# Every row's MFU is computed here by one formula, the arch table's (arch/arch.h's arch_flops_per_token): 6 N + 6 L W T
# FLOPs per token, W attention's width (C for GPT-2, NH hd for Llama), N the parameters without the vocabulary's
# padding rows (GPT-2 124M: 124,439,808; the Llama of d12 width: 112,934,400; both with the 50,257-token vocabulary),
# over the peak that train_gpt reports for the device, so the programs are compared on ms/step alone; each
# program's own MFU figure uses its own convention (train_gpt's counts the padding rows: 0.03% more).
set -uo pipefail
cd "$(dirname "$0")/.."
APPEND=0 PARTS=()
for a in "$@"; do
    case "$a" in
        --append) APPEND=1 ;;
        rows1|rows32|llama|kernels|attention) PARTS+=("$a") ;;
        *) echo "bench_gpu.sh: unknown part '$a' (expected --append, rows1, rows32, llama, kernels, attention)" >&2; exit 2 ;;
    esac
done
[ ${#PARTS[@]} -eq 0 ] && PARTS=(rows1 rows32 llama kernels attention)
want() { printf '%s\n' "${PARTS[@]}" | grep -qx "$1"; }
STEPS=${STEPS:-20}              # steps per program at one micro-batch; the first 3 are not counted
ACCUM_STEPS=${ACCUM_STEPS:-8}   # steps per program at 0.5M tokens (each about 32 micro-batches)
LIM_TG=${BENCH_LIMIT_TRAIN_GPT:-120} LIM_PT=${BENCH_LIMIT_PYTORCH:-300} LIM_LC=${BENCH_LIMIT_LLMC:-180}
LIM_LC_BUILD=${BENCH_LIMIT_LLMC_BUILD:-300}
TORCH_PY=${TORCH_PYTHON:-python3}   # the Python that holds PyTorch (with CUDA)
B=${BENCH_B:-16} T=${BENCH_T:-1024} ACCUM=32
N_PARAMS=124439808 L=12 C=768
TRAIN_GPT=${BENCH_TRAIN_GPT:-./train_gpt} DEVICE=${BENCH_DEVICE:-cuda}
TP=${TP:-1}
case "$TP" in ''|*[!0-9]*|0) echo "bench_gpu.sh: TP=$TP, expected a tensor-parallel degree >= 1" >&2; exit 2 ;; esac
TG_LAUNCH=() TG_TP=()  # train_gpt at TP > 1: mpirun -np TP ... --tp TP
if [ "$TP" -gt 1 ]; then
    read -r -a TG_LAUNCH <<< "${MPIRUN:-mpirun}"
    TG_LAUNCH+=(-np "$TP" -x OMP_NUM_THREADS) TG_TP=(--tp "$TP")
    if [ -n "${SP:-}" ]; then TG_TP+=(--sp "$SP"); fi
fi
# the Llama row: train_gpt's llama-dN (arch/gpt2.h's llama_config_from_descriptor) and its unpadded parameter count
LLAMA_DEPTH=${BENCH_LLAMA_DEPTH:-12}
read -r LLAMA_N LLAMA_W LLAMA_SHAPE < <(python3 - "$LLAMA_DEPTH" <<'PYEOF'
import sys
d = int(sys.argv[1]); C, NH = 64 * d, d
KV = d // 4 if d % 4 == 0 else d // 2 if d % 2 == 0 else d
hd, H, V = 64, (8 * C // 3 + 63) // 64 * 64, 50257
layer = 2 * C + (NH + 2 * KV) * hd * C + C * NH * hd + 3 * C * H  # two RMSNorms, wqkv, wo, wfc (up | gate), wproj
print(d * layer + C + V * C, NH * hd, f"L {d}, C {C}, NH {NH}, KV {KV}, hd {hd}, SwiGLU H {H}")  # + final norm, tied wte
PYEOF
)
[ "${BENCH_NO_BUILD:-0}" = 1 ] || make -s train_gpt dev/cuda/kernels dev/cuda/attention || exit 1
W=$(mktemp -d /tmp/bench_gpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
stopped() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }  # timeout's exit status when it stopped the command

# 16M random GPT-2 tokens in llm.c's shard format (both trainers read it)
SHARD=${BENCH_SHARD:-}
if want rows1 || want rows32 || want llama; then
    if [ -z "$SHARD" ] || [ ! -s "$SHARD" ]; then SHARD="$W/rand.bin"; python3 dev/rand_shard.py "$SHARD" || exit 1; fi
fi

# One line per program: "<name> <model> B=16[ x32] T=1024: X ms/step, Y tok/s, MFU Z%[, extra]", from the median
# step time after the warm-up steps (ms per step in a file, one per line). The model's N, L and attention width W
# give the FLOPs (6 N + 6 L W T per token).
PEAK=""
MODEL=d12 MODEL_N=$N_PARAMS MODEL_L=$L MODEL_W=$C   # the rows' model: GPT-2 124M; the llama part sets its own
row() {  # name, accum, file of step times in ms, extra text
    python3 - "$1" "$2" "$3" "$4" "$PEAK" $B $T "$MODEL_N" "$MODEL_L" "$MODEL_W" "$MODEL" "${ROW_GPUS:-1}" <<'PYEOF'
import statistics, sys
name, accum, path, extra, peak = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
B, T, N, L, C = map(int, sys.argv[6:11])
model, gpus = sys.argv[11], int(sys.argv[12])
peak = str(float(peak) * gpus) if peak else peak  # train_gpt --tp N: N GPUs' peak
ms = [float(x) for x in open(path).read().split()]
ms = ms[3:] if len(ms) > 4 else ms[1:] if len(ms) > 1 else ms
if not ms: sys.exit(f"{name}: no step times")
m = statistics.median(ms)
tps = B * T * accum / (m / 1e3)
mfu = f", MFU {100 * (6 * N + 6 * L * C * T) * tps / float(peak):.1f}%" if peak else ""
acc = f" x{accum}" if accum > 1 else ""
print(f"{name} {model} B={B}{acc} T={T}: {m:.1f} ms/step, {tps:.0f} tok/s{mfu}{', ' + extra if extra else ''}")
print(f"{name}\t{model}x{accum}\t{m:.4f}", file=open(sys.argv[3] + ".row", "w"))
PYEOF
}

run_train_gpt() {  # accum, steps (the model: $MODEL, a descriptor -e takes)
    local acc=$1 steps=$2 f="$W/${MODEL}_tg$1" what; what="$MODEL B=$B$([ "$1" -gt 1 ] && echo " x$1") T=$T"
    local log="$f.jsonl"
    timeout -k 5 "$LIM_TG" "${TG_LAUNCH[@]}" "$TRAIN_GPT" -i "$SHARD" -e "$MODEL" -b $B -t $T --grad-accum "$acc" -x "$steps" \
        -v 0 -s 0 "${TG_TP[@]}" --log "$log" > "$f.out" 2>&1
    local rc=$?
    if stopped $rc; then echo "train_gpt $what: stopped after its ${LIM_TG} s limit: $(tail -1 "$f.out")"; return 1; fi
    if [ $rc -ne 0 ]; then echo "train_gpt $what: failed: $(grep -m1 -iE 'error|out of' "$f.out")"; return 1; fi
    python3 - "$log" > "$f.ms" <<'PYEOF'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "loss" in d and "ms" in d: print(d["ms"])
PYEOF
    if [ -z "$PEAK" ]; then  # the device's peak as train_gpt reports it: flops_per_s / mfu
        PEAK=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if "\"mfu\"" in l]
r=[d for d in r if d.get("mfu")]
print(r[-1]["flops_per_s"]/r[-1]["mfu"] if r else "")' "$log")
    fi
    ROW_GPUS=$TP row train_gpt "$acc" "$f.ms" \
        "$(grep -E '^step ' "$f.out" | tail -1 | grep -oE 'peak [^|]*[^ |]')${TG_TP[*]:+, ${TG_TP[*]} on $TP ranks}"
}

run_pytorch() {  # accum, steps (the model: $MODEL, d12 or llama-dN: transformers' LlamaForCausalLM)
    local acc=$1 steps=$2 f="$W/${MODEL}_pt$1" what; what="$MODEL B=$B$([ "$1" -gt 1 ] && echo " x$1") T=$T"
    local fam=(--depth 12); case "$MODEL" in llama-d*) fam=(--llama --depth "${MODEL#llama-d}") ;; esac
    timeout -k 5 "$LIM_PT" "$TORCH_PY" dev/bench_pytorch.py "${fam[@]}" --batch $B --seq $T --accum "$acc" --steps $((steps + 5)) \
        --device "$DEVICE" > "$f.out" 2>&1
    local rc=$?
    if stopped $rc; then echo "pytorch $what: stopped after its ${LIM_PT} s limit (torch.compile included)"; return 1; fi
    if [ $rc -ne 0 ]; then echo "pytorch $what: failed: $(tail -1 "$f.out")"; return 1; fi
    python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d["ms_per_step"])' \
        "$f.out" > "$f.ms"
    # peak memory, and (Llama) which transformers and attention, or "eager" where torch.compile was not used
    row pytorch "$acc" "$f.ms" "$(python3 -c 'import json,sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
p = d["peak_mem_gib"]
x = ["peak %.1f GiB" % p] if p == p else []
if d.get("model", "").startswith("llama"): x.append(d["note"].split(";")[0])
if not d.get("compiled", True): x.append("EAGER (no torch.compile)")
print(", ".join(x))' "$f.out")"
}

# llm.c: built once, in a copy of LLMC_DIR (the user's checkout is not written to), as its Makefile builds
# train_gpt2cu for this GPU, with cuDNN attention (its fast path) when cudnn.h and the cudnn-frontend headers
# are found, else without; the row says which. Single GPU: no NCCL, no MPI.
LLMC_ATT="" LLMC_BUILT=0
# PyTorch's wheels' library folders (cuDNN, NVRTC), for llm.c's run: on a machine whose loader knows cuDNN only
# through PyTorch, the prebuilt train_gpt2cu (linked by soname) finds it there
llmc_libs() {
    "$TORCH_PY" -c 'import nvidia, os; print(":".join(os.path.join(p, q, l) for p in nvidia.__path__ for q in sorted(os.listdir(p)) for l in ("lib", "lib64") if os.path.isdir(os.path.join(p, q, l))))' 2>/dev/null
}
LLMC_LD=$(llmc_libs)
if [ -n "${LLMC_BIN:-}" ]; then
    if [ -x "$LLMC_BIN" ]; then
        info="$(dirname "$LLMC_BIN")/BUILD.txt"
        LLMC_REV="$(awk 'NR == 1 {print $2}' "$info" 2>/dev/null) (prebuilt)"
        LLMC_ATT="cuDNN attention"
    else
        LLMC_BIN=""
    fi
fi
build_llmc() {
    LLMC_BUILT=1
    if [ -z "${LLMC_DIR:-}" ]; then
        LLMC_WHY="not run: set LLMC_DIR to a checkout of llm.c (git clone https://github.com/karpathy/llm.c), and for its cuDNN attention CUDNN_FRONTEND_PATH to cudnn-frontend/include (git clone https://github.com/NVIDIA/cudnn-frontend)"
        return 1
    fi
    [ -f "$LLMC_DIR/train_gpt2.cu" ] || { LLMC_WHY="not run: LLMC_DIR=$LLMC_DIR has no train_gpt2.cu"; return 1; }
    local src="$W/llmc"
    mkdir -p "$src" && (cd "$LLMC_DIR" && tar --exclude=./dev/data --exclude=./build --exclude=./.git -cf - .) | tar -xf - -C "$src"
    local cc; cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    # CUDA 13 gave cudaMemAdvise a cudaMemLocation where llm.c passes a device number: a shim header of ours
    # restores the old form (only llm.c's out-of-memory fallback calls it). NVML: the driver ships only
    # libnvidia-ml.so.1, so a link named libnvidia-ml.so is made for the linker.
    local libs="-include $PWD/dev/llmc_cuda13.h"
    local nvml; nvml=$(ldconfig -p 2>/dev/null | grep -m1 -oE '/[^ ]*libnvidia-ml\.so\.1$')
    [ -z "$nvml" ] && nvml=$(ls /usr/local/nvidia/lib64/libnvidia-ml.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 2>/dev/null | head -1)
    if [ -n "$nvml" ]; then mkdir -p "$W/lib" && ln -sf "$nvml" "$W/lib/libnvidia-ml.so" && libs="$libs -L$W/lib"; fi
    local cudnn=() fe="${CUDNN_FRONTEND_PATH:-}"
    [ -z "$fe" ] && for d in "$HOME/cudnn-frontend/include" "$LLMC_DIR/cudnn-frontend/include"; do [ -d "$d" ] && fe=$d && break; done
    # cudnn.h: PyTorch's pip package nvidia-cudnn's where it has one (include/ and lib/ beside each other: the
    # library llm.c then loads, through LLMC_LD, is the one it was compiled against), else the CUDA toolkit's
    local cudnn_inc; cudnn_inc=$("$TORCH_PY" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    if [ -n "$fe" ] && [ -f "$fe/cudnn_frontend.h" ]; then
        ln -sfn "$(cd "$fe/.." && pwd)" "$src/cudnn-frontend"
        local extra=""
        if [ -n "$cudnn_inc" ] && [ -f "$cudnn_inc/include/cudnn.h" ]; then
            extra=" -I$cudnn_inc/include"; libs="$libs -L$cudnn_inc/lib"; export LD_LIBRARY_PATH="$cudnn_inc/lib:${LD_LIBRARY_PATH:-}"
            if [ ! -e "$cudnn_inc/lib/libcudnn.so" ]; then  # the wheel ships only libcudnn.so.9
                mkdir -p "$W/lib" && ln -sf "$(ls "$cudnn_inc"/lib/libcudnn.so.* | head -1)" "$W/lib/libcudnn.so" && libs="$libs -L$W/lib"
            fi
        fi
        # newer cudnn-frontends compile some kernels at run time (NVRTC) and load them through the driver API, so
        # llm.c links libnvrtc and libcuda. The toolkit's lib64/stubs holds a link-time libcuda.so (the driver
        # installs only libcuda.so.1, which the loader finds at run time); the stub is never loaded.
        libs="$libs -L$(dirname "$(command -v nvcc)")/../lib64/stubs -lnvrtc -lcuda"
        cudnn=(USE_CUDNN=1 "CUDNN_FRONTEND_PATH=cudnn-frontend/include$extra")
        LLMC_ATT="cuDNN attention"
    else
        LLMC_ATT="its own attention kernels (no cudnn-frontend headers: set CUDNN_FRONTEND_PATH for cuDNN's)"
    fi
    if ! (cd "$src" && timeout -k 5 "$LIM_LC_BUILD" make -j4 train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY="$cc" "${cudnn[@]}" \
            NVCC_LDLIBS="$libs" > "$W/llmc_build.out" 2>&1); then
        LLMC_WHY="not run: building train_gpt2cu failed or passed its ${LIM_LC_BUILD} s ($(grep -m1 -E 'error' "$W/llmc_build.out"); whole log kept in dev/bench/llmc_build.log)"
        cp "$W/llmc_build.out" dev/bench/llmc_build.log
        return 1
    fi
    LLMC_BIN="$src/train_gpt2cu"
    LLMC_REV=$(git -C "$LLMC_DIR" rev-parse --short HEAD 2>/dev/null || cat "$LLMC_DIR/.revision" 2>/dev/null || echo "unknown revision")
}

run_llmc() {  # accum, steps
    local acc=$1 steps=$2 what; what="d12 B=$B$([ "$1" -gt 1 ] && echo " x$1") T=$T"
    if [ -z "$LLMC_BIN" ] && [ $LLMC_BUILT = 0 ]; then build_llmc; fi
    if [ -z "$LLMC_BIN" ]; then echo "llm.c $what: $LLMC_WHY"; return 1; fi
    # -e d12: a fresh GPT-2 124M; -r 0: no recomputation (as the other two); -v and -s past the end: no
    # validation or sampling inside the timed steps (llm.c evaluates once at its last step, which is not timed)
    (cd "$(dirname "$LLMC_BIN")" && LD_LIBRARY_PATH="${LLMC_LD:+$LLMC_LD:}${LD_LIBRARY_PATH:-}" timeout -k 5 "$LIM_LC" \
        "./$(basename "$LLMC_BIN")" -i "$SHARD" -j "$SHARD" -e d12 -b $B -t $T \
        -d $((B * T * acc)) -x "$steps" -v 1000000 -m 1 -s 1000000 -r 0 > "$W/lc$acc.out" 2>&1)
    local rc=$?
    if [ $rc -ne 0 ] && ! stopped $rc && [ $LLMC_BUILT = 0 ] && [ -n "${LLMC_DIR:-}" ] \
            && grep -qiE 'cudnn|shared librar' "$W/lc$acc.out"; then
        # the prebuilt one failed over its libraries (another cuDNN, say): build it here, once, and run again
        echo "  (llm.c prebuilt failed: $(grep -m1 -iE 'error|out of' "$W/lc$acc.out"); building it here)"
        LLMC_BIN=""; build_llmc; run_llmc "$@"; return
    fi
    if stopped $rc; then echo "llm.c $what: stopped after its ${LIM_LC} s limit: $(tail -1 "$W/lc$acc.out")"; return 1; fi
    if [ $rc -ne 0 ]; then echo "llm.c $what: failed: $(grep -m1 -iE 'error|out of' "$W/lc$acc.out")"; return 1; fi
    grep -E '^step +[0-9]+/' "$W/lc$acc.out" | sed -E 's/.*\| ([0-9.]+) ms \|.*/\1/' > "$W/lc$acc.ms"
    row llm.c "$acc" "$W/lc$acc.ms" "$LLMC_ATT, llm.c $LLMC_REV, $(grep -m1 -oE 'device memory usage: [0-9]+ MiB' "$W/lc$acc.out" | sed 's/device memory usage/allocated/')"
}

ratios() {  # accum (of the rows of $MODEL)
    python3 - "$W" "${MODEL}x$1" <<'PYEOF'
import os, sys
rows = {}
for f in os.listdir(sys.argv[1]):
    if f.endswith(".ms.row"):
        name, tag, ms = open(os.path.join(sys.argv[1], f)).read().split()
        if tag == sys.argv[2]: rows[name] = float(ms)
if "train_gpt" in rows:
    others = [f"{rows[k] / rows['train_gpt']:.2f}x {k}" for k in ("pytorch", "llm.c") if k in rows]
    if others: print("  train_gpt's speed: " + ", ".join(others) + " (their ms/step over ours)")
PYEOF
}

# the Llama row's parameter counts: train_gpt's (its model line) and LlamaForCausalLM's (the script's JSON), each
# with and without the vocabulary's padding rows, beside the count the MFU uses
params_check() {
    python3 - "$W/${MODEL}_tg1.out" "$W/${MODEL}_pt1.out" "$MODEL_N" <<'PYEOF'
import json, re, sys
tg = pt = None
try:
    m = re.search(r"\| (\d+) parameters \((\d+) without", open(sys.argv[1]).read())
    tg = (int(m.group(1)), int(m.group(2))) if m else None
except OSError: pass
try:
    d = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1]); pt = (d["params"], d["params_unpadded"])
except (OSError, ValueError, IndexError, KeyError): pass
f = lambda p: f"{p[0]:,} ({p[1]:,} without the padding rows)" if p else "n/a"
verdict = "equal" if tg and pt and tg == pt else "DIFFER" if tg and pt else "not compared"
ok = " = the N of the MFU" if tg and tg[1] == int(sys.argv[3]) else f" (the MFU's N is {int(sys.argv[3]):,})"
print(f"  parameters: train_gpt {f(tg)}, LlamaForCausalLM {f(pt)}: {verdict}{ok}")
PYEOF
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_')
mkdir -p dev/bench
out=${BENCH_OUT:-dev/bench/bench_gpu_${gpu:-none}.txt}
tee_args=(); [ $APPEND = 1 ] && tee_args=(-a)
{
  [ $APPEND = 1 ] || echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU'), train_gpt ${BENCH_REV:-$(git rev-parse --short HEAD 2>/dev/null)}"
  if want rows1; then
    echo "# one micro-batch per step; MFU = (6N + 6LCT) x tokens/s over train_gpt's peak for this device"
    run_train_gpt 1 "$STEPS"; run_pytorch 1 "$STEPS"; run_llmc 1 "$STEPS"; ratios 1
    grep -m1 "memory plan" "$W/d12_tg1.out" 2>/dev/null
  fi
  if want rows32; then
    echo "# llm.c's GPT-2 124M recipe: 0.5M tokens per step ($ACCUM micro-batches of $B x $T), $ACCUM_STEPS steps each"
    run_train_gpt $ACCUM "$ACCUM_STEPS"; run_pytorch $ACCUM "$ACCUM_STEPS"; run_llmc $ACCUM "$ACCUM_STEPS"; ratios $ACCUM
  fi
  if want llama; then  # the Llama family at d12 width, B=16: train_gpt and transformers' LlamaForCausalLM (no llm.c row)
    MODEL=llama-d$LLAMA_DEPTH MODEL_N=$LLAMA_N MODEL_W=$LLAMA_W MODEL_L=$LLAMA_DEPTH
    echo "# $MODEL ($LLAMA_SHAPE, RMSNorm, RoPE, tied head), one micro-batch per step; MFU = (6N + 6 L (NH hd) T) x tokens/s, N = $LLAMA_N"
    run_train_gpt 1 "$STEPS"; run_pytorch 1 "$STEPS"; ratios 1
    params_check
    grep -m1 "memory plan" "$W/${MODEL}_tg1.out" 2>/dev/null
    MODEL=d12 MODEL_N=$N_PARAMS MODEL_W=$C MODEL_L=$L
  fi
  # where the time goes: each kernel alone at the same shapes (B=8)
  want kernels && ./dev/cuda/kernels bench
  if want attention; then  # ours, then PyTorch's scaled_dot_product_attention at the same shapes and columns
    ./dev/cuda/attention bench
    "$TORCH_PY" dev/bench_sdpa.py
  fi
} 2>&1 | tee "${tee_args[@]}" "$out"
