#!/usr/bin/env bash
# gpu_session.sh: what a lent GPU machine runs (the device tool: 15 minutes of device time a task, start-up
# included, one command at most 10 minutes), built here beforehand so that one call of at most 9 minutes does it
# all. docs/gpu_session.md says how and why; in short:
#
#   bash dev/gpu_session.sh prepare            # HERE (no GPU): the sm_90a binaries and llm.c's train_gpt2cu,
#                                              # built as the GPU machine would build them, into .bench/
#   bash dev/gpu_session.sh all --dry-run      # HERE: every step, its limit, the total, what travels
#   bash dev/gpu_session.sh all                # THERE: the one call, carry [".bench"], timeout_s 600
#   bash dev/gpu_session.sh check|bench|levers # the old three phases (one 10-minute call each), still callable
#   bash dev/gpu_session.sh tune SWEEP_LOG     # HERE or there: cuda/attention_tuned.h's rows from an attention sweep
#
# `all` runs, in the order that loses least when the time runs out (each step under its own `timeout`, and all
# of them under one deadline, SESSION_BUDGET=540 s from the start): the machine's facts; the prebuilt binaries put
# in place (built there only where they are stale or do not run); the attention check (fp32/bf16/fp16, the
# backward's blocks taking turns on dQ at T = 250 and 1024), beside make test-gpu as its float64 reference keeps
# one CPU core busy, and beside it too PyTorch's two models compiled once (pt_warm: the timed runs then find
# torch.compile's work in its cache); the step benchmark (this trainer, compiled PyTorch and llm.c at B=16, then at
# llm.c's 0.5M-token recipe); the Llama step (this trainer's llama-d12 beside transformers' LlamaForCausalLM of the
# same shape, compiled); attention TFLOP/s beside PyTorch's SDPA (GQA rows included); the attention sweep (issue 49:
# the KV-stationary backward's instantiations under causal, document and window masks; its `best` lines rewrite
# cuda/attention_tuned.h there, and the diff is in the step's log: commit it with `tune` on the log); the kernels one by one (the
# Llama family's after GPT-2's); the levers. Each step's log goes to a work folder as it runs; after each step a line is
# added to $OUT/summary.txt, the headline files are copied to $OUT and all logs are packed again into
# $OUT/logs.tar.gz, so a call cut short still brings back what was done, and $OUT never holds more than 8 files
# (the device tool's limit). Without $OUT (a run by hand) the files go to dev/bench/session/.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
mode=${1:-}
[ $# -gt 0 ] && shift
DRY=${DRY_RUN:-0}
[ "$mode" = tune ] && { TUNE_LOG=${1:-}; set --; }  # (tune's argument is the log, read below)
for a in "$@"; do
    case "$a" in --dry-run) DRY=1 ;; *) echo "gpu_session.sh: unknown argument '$a' (expected --dry-run)" >&2; exit 2 ;; esac
done
# tune LOG (here or there): cuda/attention_tuned.h's rows for the sweep's device from LOG (`./dev/cuda/attention sweep`'s
# output: its `best "GPU" HS PRECISION CONFIG` lines), replacing that GPU's rows between the markers, the others kept
if [ "$mode" = tune ]; then
    log=$TUNE_LOG
    [ -f "$log" ] || { echo "gpu_session.sh tune: no sweep log '$log' (expected the output of ./dev/cuda/attention sweep)" >&2; exit 2; }
    grep -qE '^best "[^"]+" [0-9]+ (bf16|fp16) [0-9]+' "$log" || { echo "gpu_session.sh tune: $log has no 'best' line (did the sweep finish?)" >&2; exit 1; }
    python3 - "$log" cuda/attention_tuned.h <<'PY'
import re, sys
log, hdr = sys.argv[1], sys.argv[2]
best = [m.groups() for m in re.finditer(r'^best "([^"]+)" (\d+) (bf16|fp16) (\d+)(.*)$', open(log).read(), re.M)]
src = open(hdr).read()
a, b = src.index('    // sweep rows begin\n') + len('    // sweep rows begin\n'), src.index('    // sweep rows end')
gpus = {g for g, *_ in best}
keep = [l for l in src[a:b].splitlines(True) if not any('{"%s",' % g in l for g in gpus)]
new = ['    {"%s", %s, "%s", %s},  //%s\n' % (g, hs, pr, cfg, note) for g, hs, pr, cfg, note in best]
open(hdr, 'w').write(src[:a] + ''.join(keep + new) + src[b:])
print("cuda/attention_tuned.h: %d row(s) for %s" % (len(new), ", ".join(sorted(gpus))))
PY
    exit $?
fi
case "$mode" in
    prepare|all|check|bench|levers) ;;
    *) echo "usage: bash dev/gpu_session.sh prepare | all [--dry-run] | check | bench | levers (see the top of this file)" >&2; exit 2 ;;
esac

BUDGET=${SESSION_BUDGET:-540}          # seconds for the whole of `all`; the device tool's call is given 600
CARRY_LIMIT=$((64 * 1024 * 1024))       # the device tool's limit on what travels (working tree + carried paths)
PREP=.bench                             # ignored (.gitignore), carried: carry [".bench"]
ARCH_90A='-gencode arch=compute_90a,code=sm_90a'
# The binaries built here and carried; train_gpt_cpu is not among them: built there by its gcc in 3 s, for that
# CPU (-march=native here could use instructions that CPU lacks).
CUDA_BINS=(train_gpt test/test_gpt2_gpu test/test_generate_gpu dev/cuda/kernels dev/cuda/attention)
# The GPU machine's configuration: no Open MPI, no liburing (its image has neither). Passed on every make command
# line, here and there, so the .build-cuda stamp reads the same on both machines whatever either has installed.
MAKE_CONF=(MPICC= URING=)
OLD_SRC=946684800       # 2000-01-01: unchanged sources are dated back to this (see restore_prebuilt)
OLD_STAMP=946728000     # 2000-01-01 12:00: the configuration stamp
OLD_BIN=946771200       # 2000-01-02: the prebuilt binaries, newer than both

die() { echo "gpu_session.sh: $*" >&2; exit 1; }
human() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# ---------------------------------------------------------------------------------------------------------------
# prepare (here): build from a clean export of HEAD in build/gpu/src (ignored), as the GPU machine would: sm_90a
# only, MAKE_CONF; then llm.c's train_gpt2cu with cuDNN attention from the device tool's snapshots of llm.c and
# cudnn-frontend (fetch github:karpathy/llm.c, github:NVIDIA/cudnn-frontend); copy what runs there into .bench/
# with a manifest: the commit, the stamp, each binary's sha256, and the sha256 of every tracked file it was built
# from (restore_prebuilt compares these with the tree that travelled).
LLMC_GIT=${LLMC_GIT:-/work/.mirror/karpathy+llm.c/repo}
FRONTEND_GIT=${FRONTEND_GIT:-/work/.mirror/NVIDIA+cudnn-frontend/repo}
BASE_REV=${BASE_REV:-1684b4e}   # the tree of the one H100 run (dev/bench/bench_gpu_NVIDIA_H100_80GB_HBM3.txt)
prepare() {
    command -v nvcc > /dev/null || die "prepare needs nvcc on the PATH (the CUDA toolkit)"
    git rev-parse HEAD > /dev/null 2>&1 || die "prepare needs the git checkout (it builds HEAD)"
    local rev; rev=$(git rev-parse --short HEAD)
    if ! git diff --quiet HEAD -- . ':!dev/bench' 2>/dev/null; then
        echo "note: the working tree differs from HEAD ($rev); prepare builds HEAD, so a GPU machine that gets these"
        echo "      changes rebuilds the binaries they touch (commit first to avoid that)"
    fi
    local src=build/gpu/src log=build/gpu/prepare.log
    mkdir -p build/gpu
    : > "$log"
    # HEAD exported over the last export: a file whose content is unchanged keeps its date, so make rebuilds only
    # what a change touches
    rm -rf "$src.new" && mkdir -p "$src.new" "$src" && git archive HEAD | tar -x -C "$src.new" || die "git archive HEAD failed"
    local f
    while IFS= read -r -d '' f; do
        cmp -s "$src.new/$f" "$src/$f" || { mkdir -p "$src/$(dirname "$f")" && cp -p "$src.new/$f" "$src/$f"; } || die "copying $f into $src failed"
    done < <(cd "$src.new" && find . -type f -print0)
    rm -rf "$src.new" && echo "$rev" > "$src/.rev"
    echo "== building ${CUDA_BINS[*]} at $rev for sm_90a, ${MAKE_CONF[*]} (nice -n 19, log $log)"
    local t0=$SECONDS
    (cd "$src" && NVCC_ARCH="$ARCH_90A" nice -n 19 make -j2 "${MAKE_CONF[@]}" "${CUDA_BINS[@]}") >> "$log" 2>&1 \
        || { tail -20 "$log"; die "the CUDA build failed (log $log)"; }
    echo "   $((SECONDS - t0)) s"

    rm -rf "$PREP.new" && mkdir -p "$PREP.new/bin" "$PREP.new/llmc"
    # the levers' base row: train_gpt of the tree the one H100 run measured (42.1 ms a step), same configuration
    local base=build/gpu/base
    if git cat-file -e "$BASE_REV^{commit}" 2>/dev/null; then
        if [ "$(cat "$base/.rev" 2>/dev/null)" != "$BASE_REV" ]; then
            rm -rf "$base" && mkdir -p "$base" && git archive "$BASE_REV" | tar -x -C "$base" && echo "$BASE_REV" > "$base/.rev"
        fi
        echo "== building train_gpt at $BASE_REV (the levers' base row)"
        t0=$SECONDS
        if (cd "$base" && NVCC_ARCH="$ARCH_90A" nice -n 19 make "${MAKE_CONF[@]}" train_gpt) >> "$log" 2>&1; then
            mkdir -p "$PREP.new/base" && cp -p "$base/train_gpt" "$PREP.new/base/train_gpt" && echo "$BASE_REV" > "$PREP.new/base/rev"
            echo "   $((SECONDS - t0)) s"
        else
            echo "   failed (log $log): the levers run without a base row"
        fi
    fi
    local b
    for b in "${CUDA_BINS[@]}"; do mkdir -p "$PREP.new/bin/$(dirname "$b")" && cp -p "$src/$b" "$PREP.new/bin/$b"; done
    cp "$src/.build-cuda" "$PREP.new/build-cuda"
    (cd "$src" && git -C "$ROOT" ls-tree -r --name-only HEAD | xargs -d '\n' sha256sum) > "$PREP.new/sources.sha256"
    echo "$rev" > "$PREP.new/rev"

    # llm.c: its source and cudnn-frontend's headers travel too, for a build there if this one does not run
    local lsrc=build/gpu/llmc fe=build/gpu/cudnn-frontend lrev="" ferev=""
    if [ -d "$LLMC_GIT" ] && [ -d "$FRONTEND_GIT" ]; then
        lrev=$(git --git-dir="$LLMC_GIT" rev-parse --short HEAD)
        ferev=$(git --git-dir="$FRONTEND_GIT" rev-parse --short HEAD)
        if [ "$(cat "$lsrc/.revision" 2>/dev/null)" != "$lrev" ]; then
            rm -rf "$lsrc" && mkdir -p "$lsrc" && git --git-dir="$LLMC_GIT" archive HEAD | tar -x -C "$lsrc" && echo "$lrev" > "$lsrc/.revision"
        fi
        if [ "$(cat "$fe/.revision" 2>/dev/null)" != "$ferev" ]; then
            rm -rf "$fe" && mkdir -p "$fe" && git --git-dir="$FRONTEND_GIT" archive HEAD include | tar -x -C "$fe" && echo "$ferev" > "$fe/.revision"
        fi
        ln -sfn ../cudnn-frontend "$lsrc/cudnn-frontend"   # llm.c's Makefile looks for ./cudnn-frontend/include
        echo "== building llm.c's train_gpt2cu ($lrev) for sm_90 with cuDNN attention (cudnn-frontend $ferev)"
        t0=$SECONDS
        llmc_make_args "$ROOT/dev/llmc_cuda13.h" "$(dirname "$(command -v nvcc)")/../lib64/stubs"
        if (cd "$lsrc" && nice -n 19 make train_gpt2cu "${LLMC_ARGS[@]}") >> "$log" 2>&1; then
            cp -p "$lsrc/train_gpt2cu" "$PREP.new/llmc/train_gpt2cu"
            echo "   $((SECONDS - t0)) s"
        else
            tail -5 "$log"; echo "   llm.c did not build (log $log): the GPU machine will build it"
        fi
        (cd "$lsrc" && tar --exclude=./dev/data --exclude=./build --exclude=./cudnn-frontend --exclude=./train_gpt2cu \
            --exclude=./.revision -cf - .) | (mkdir -p "$PREP.new/llmc/src" && tar -xf - -C "$PREP.new/llmc/src")
        echo "$lrev" > "$PREP.new/llmc/src/.revision"
        mkdir -p "$PREP.new/llmc/cudnn-frontend" && cp -r "$fe/include" "$PREP.new/llmc/cudnn-frontend/"
        local cudnn_v; cudnn_v=$(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{printf "%s%s", s, $3; s="."}' "$(dirname "$(command -v nvcc)")/../include/cudnn_version.h" 2>/dev/null)
        {
            echo "llm.c $lrev (github:karpathy/llm.c), cudnn-frontend $ferev (github:NVIDIA/cudnn-frontend)"
            echo "built against cuDNN ${cudnn_v:-unknown} and $(nvcc --version | tail -2 | head -1)"
            llmc_make_args dev/llmc_cuda13.h '<nvcc>/../lib64/stubs'
            printf 'make train_gpt2cu'; printf " '%s'" "${LLMC_ARGS[@]}"; echo
        } > "$PREP.new/llmc/BUILD.txt"
    else
        echo "note: no llm.c or cudnn-frontend snapshot ($LLMC_GIT, $FRONTEND_GIT: fetch github:karpathy/llm.c and"
        echo "      github:NVIDIA/cudnn-frontend with the device tool's fetch); the bench runs without llm.c's row"
    fi

    {
        echo "prepared $(date -u +%FT%TZ) on $(hostname) from commit $rev ($(git log -1 --format=%s HEAD | cut -c1-80))"
        echo "nvcc: $(nvcc --version | tail -2 | head -1)"
        echo "host compiler: $(gcc --version | head -1); glibc $(ldd --version | head -1 | awk '{print $NF}')"
        echo "make: NVCC_ARCH='$ARCH_90A' make ${MAKE_CONF[*]} ${CUDA_BINS[*]}"
        echo "stamp .build-cuda: $(cat "$PREP.new/build-cuda")"
        echo "binaries (sha256, bytes, path):"
        for b in "${CUDA_BINS[@]}" llmc/train_gpt2cu base/train_gpt; do
            local f="$PREP.new/bin/$b"; case "$b" in llmc/*|base/*) f="$PREP.new/$b" ;; esac
            [ -f "$f" ] && echo "  $(sha256sum "$f" | cut -c1-16) $(stat -c %s "$f") $b"
        done
        [ -f "$PREP.new/llmc/BUILD.txt" ] && sed 's/^/llm.c: /' "$PREP.new/llmc/BUILD.txt"
        echo "sources: $(wc -l < "$PREP.new/sources.sha256") tracked files' sha256 in sources.sha256"
    } > "$PREP.new/MANIFEST.txt"
    rm -rf "$PREP.old"; [ -d "$PREP" ] && mv "$PREP" "$PREP.old"
    mv "$PREP.new" "$PREP" && rm -rf "$PREP.old"
    cat "$PREP/MANIFEST.txt"
    echo "== $PREP: $(human "$(du -sb "$PREP" | cut -f1)") (carried beside the working tree: 64 MiB in all)"
}

# llm.c's make arguments: single GPU, no MPI, sm_90 (as llm.c builds for an H100 itself), cuDNN attention.
# CUDA 13 gave cudaMemAdvise a cudaMemLocation: dev/llmc_cuda13.h restores the form llm.c calls. Newer
# cudnn-frontends compile kernels at run time (NVRTC) and load them through the driver API: -lnvrtc -lcuda, the
# latter from the toolkit's stubs (the driver's libcuda.so.1 is what loads). NVCC_LDFLAGS is given whole, without
# llm.c's -lnvidia-ml: NVML only feeds its clock and power printout, and no libnvidia-ml is here to link.
llmc_make_args() {  # shim header, stubs folder -> LLMC_ARGS
    LLMC_ARGS=(NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=90 USE_CUDNN=1 CUDNN_FRONTEND_PATH=cudnn-frontend/include
               "NVCC_LDFLAGS=-lcublas -lcublasLt -lcudnn" "NVCC_LDLIBS=-include $1 -L$2 -lnvrtc -lcuda")
}

# ---------------------------------------------------------------------------------------------------------------
# restore_prebuilt (there, and in the dry run's rehearsal here): make decides what to rebuild by dates, and the
# dates a copied tree gets are no evidence of anything. So the evidence is content: every tracked file whose
# sha256 matches the manifest's is dated 2000-01-01, the stamp 12 hours later, the prebuilt binaries 2000-01-02;
# a file changed or added since `prepare` keeps today's date. Then make, with the same configuration, rebuilds
# exactly the binaries whose sources changed, and all of them if the stamp it computes differs (another nvcc,
# other flags). Prints what it found.
restore_prebuilt() {
    if [ ! -f "$PREP/MANIFEST.txt" ] || [ ! -f "$PREP/sources.sha256" ]; then
        echo "no prebuilt binaries ($PREP/MANIFEST.txt missing): everything is built here"; return 0
    fi
    echo "prebuilt: $(head -1 "$PREP/MANIFEST.txt")"
    local changed
    changed=$(sha256sum -c "$PREP/sources.sha256" 2>/dev/null | grep -v ': OK$' | sed 's/: .*//')
    sha256sum -c "$PREP/sources.sha256" 2>/dev/null | sed -n 's/: OK$//p' | xargs -d '\n' -r touch -h -d "@$OLD_SRC"
    if [ -n "$changed" ]; then echo "changed since prepare (a binary built from one is rebuilt):"; echo "$changed" | sed 's/^/  /' | head -20; fi
    local b n=0
    for b in "${CUDA_BINS[@]}"; do
        [ -f "$PREP/bin/$b" ] || continue
        # chmod: in case the transfer kept no modes
        mkdir -p "$(dirname "$b")" && cp "$PREP/bin/$b" "$b" && chmod +x "$b" && touch -d "@$OLD_BIN" "$b" && n=$((n + 1))
    done
    cp "$PREP/build-cuda" .build-cuda && touch -d "@$OLD_STAMP" .build-cuda
    echo "$n prebuilt binaries in place"
}

# the binaries that would not run here: a library the loader cannot find, or train_gpt's --help failing
check_runs() {
    local b bad=()
    for b in "${CUDA_BINS[@]}"; do
        [ -x "$b" ] || continue
        if ldd "$b" 2>&1 | grep -q 'not found'; then bad+=("$b"); echo "  $b: $(ldd "$b" | grep 'not found' | tr -s ' \t' ' ' | head -2)"; fi
    done
    if [ -x train_gpt ] && ! ./train_gpt --help > /dev/null 2>&1; then bad+=(train_gpt); echo "  ./train_gpt --help fails: $(./train_gpt --help 2>&1 | tail -1)"; fi
    BAD_BINS=("${bad[@]}")
}

# The prep step there: binaries in place, rebuilt where stale or not running, llm.c checked, the random shard
# that both benchmarks train on made once.
prep_step() {
    local t_shard=$SECONDS   # the shard is plain Python (~10 s): made while make runs
    python3 dev/rand_shard.py "$W/rand.bin" > "$W/shard.out" 2>&1 &
    local shard_pid=$!
    restore_prebuilt
    echo "make computes: $(make -s "${MAKE_CONF[@]}" print-config | grep '^cuda: ')"
    echo "manifest's:    cuda: $(cat "$PREP/build-cuda" 2>/dev/null || echo none)"
    local t0=$SECONDS
    make -j"$(nproc)" "${MAKE_CONF[@]}" "${CUDA_BINS[@]}" train_gpt_cpu > "$W/make.out" 2>&1
    local rc=$?
    local built; built=$(grep -oE ' -o [^ ]+' "$W/make.out" | awk '{print $2}' | tr '\n' ' ')
    echo "make: exit $rc, $((SECONDS - t0)) s, built here: ${built:-nothing}"
    [ $rc -eq 0 ] || tail -20 "$W/make.out"
    BAD_BINS=()
    check_runs
    if [ ${#BAD_BINS[@]} -gt 0 ]; then
        echo "rebuilding what does not run: ${BAD_BINS[*]}"
        rm -f "${BAD_BINS[@]}"
        make -j"$(nproc)" "${MAKE_CONF[@]}" "${BAD_BINS[@]}" 2>&1 | tail -5
    fi
    # llm.c: the prebuilt train_gpt2cu if the loader finds its libraries (cuDNN from PyTorch's wheel), else built here
    if [ -f "$PREP/llmc/train_gpt2cu" ]; then
        chmod +x "$PREP/llmc/train_gpt2cu"
        local ld; ld=$(llmc_libs)
        if LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$PREP/llmc/train_gpt2cu" 2>&1 | grep -q 'not found'; then
            echo "llm.c prebuilt: $(LD_LIBRARY_PATH="$ld" ldd "$PREP/llmc/train_gpt2cu" | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ' '): the bench builds it"
        else
            echo "llm.c prebuilt: the loader finds its libraries (with PyTorch's wheels' folders: ${ld:-none})"
            echo "$ROOT/$PREP/llmc/train_gpt2cu" > "$W/llmc_bin"
        fi
    fi
    wait $shard_pid && echo "random shard for the benchmarks: $W/rand.bin, made in $((SECONDS - t_shard)) s" \
        || echo "random shard: failed ($(tail -1 "$W/shard.out")): each benchmark makes its own"
    [ $rc -eq 0 ] && [ -x train_gpt ]
}

# where PyTorch's wheels keep cuDNN and NVRTC (the folders, joined by ':'): llm.c's train_gpt2cu names them by
# soname, and the GPU machine's loader may know them only through PyTorch (scripts/bench_gpu.sh has the same)
llmc_libs() {
    "${TORCH_PY:-python3}" -c 'import nvidia, os; print(":".join(os.path.join(p, q, l) for p in nvidia.__path__ for q in sorted(os.listdir(p)) for l in ("lib", "lib64") if os.path.isdir(os.path.join(p, q, l))))' 2>/dev/null
}

# ---------------------------------------------------------------------------------------------------------------
# The plan of `all`: name, limit in seconds, command (run by bash in the repository root). The limits of the steps
# one after another sum to at most BUDGET (a group of steps "beside" the next one counts as its longest); each also
# stops at the deadline. The bench's programs have their own limits inside (scripts/bench_gpu.sh).
#
# The limits are estimates (no window has measured them yet; the first summary.txt says which ran short or long):
# from the one H100 run's figures (42 ms a GPT-2 step, so 15 steps and the start-up ~8 s a train_gpt row, 6 steps of
# 32 micro-batches ~13 s) and torch.compile's usual cost on 16 cores (a minute or more cold per model, ~20 s from
# its cache: pt_warm compiles both models while make test-gpu runs, so the timed PyTorch rows load them). test_gpu
# grew Llama cases (kernels, the model vs transformers, steps vs the CPU build): 170 s where it had 150.
plan() {
    local bench_env="BENCH_NO_BUILD=1 BENCH_SHARD=\$W/rand.bin TORCH_PYTHON=\$TORCH_PY STEPS=15"
    STEPS=(
      "probe|10|probe"
      "prep|45|prep_step"
      "attention_check|90|./dev/cuda/attention check|beside"
      "pt_warm|150|\$TORCH_PY dev/bench_pytorch.py --depth 12 --batch 16 --seq 1024 --steps 1 & \$TORCH_PY dev/bench_pytorch.py --llama --depth 12 --batch 16 --seq 1024 --steps 1; wait|beside"
      "test_gpu|170|make ${MAKE_CONF[*]} TORCH_PYTHON=\$TORCH_PY test-gpu"
      "bench|150|$bench_env LLMC_BIN=\$(cat \$W/llmc_bin 2>/dev/null) LLMC_DIR=$PREP/llmc/src CUDNN_FRONTEND_PATH=$PREP/llmc/cudnn-frontend/include ACCUM_STEPS=6 BENCH_LIMIT_TRAIN_GPT=25 BENCH_LIMIT_LLMC=35 BENCH_LIMIT_PYTORCH=60 BENCH_LIMIT_LLMC_BUILD=90 bash scripts/bench_gpu.sh rows1 rows32"
      "llama|60|$bench_env BENCH_LIMIT_TRAIN_GPT=20 BENCH_LIMIT_PYTORCH=40 bash scripts/bench_gpu.sh --append llama"
      "attention_sdpa|40|BENCH_NO_BUILD=1 TORCH_PYTHON=\$TORCH_PY bash scripts/bench_gpu.sh --append attention"
      "attention_sweep|40|./dev/cuda/attention sweep > \$W/sweep.txt; rc=\$?; cat \$W/sweep.txt; bash dev/gpu_session.sh tune \$W/sweep.txt && git diff cuda/attention_tuned.h; exit \$rc"
      "kernels|10|BENCH_NO_BUILD=1 bash scripts/bench_gpu.sh --append kernels"
      "levers|15|BENCH_NO_BUILD=1 BENCH_SHARD=\$W/rand.bin STEPS=12 BENCH_LIMIT_TRAIN_GPT=15 BASE_BIN=\$(ls $PREP/base/train_gpt 2>/dev/null) bash scripts/bench_levers.sh"
    )
}
# the headline files copied to $OUT after each step (with summary.txt and logs.tar.gz: 8 files at most)
headline() {  # step name -> the file under $W/logs to copy, if any
    case "$1" in
        probe) echo device.txt ;; attention_check) echo attention_check.txt ;; test_gpu) echo test_gpu.txt ;;
        levers) echo levers.txt ;;
    esac
}

probe() {
    nvidia-smi -L 2>&1 || echo "no GPU (nvidia-smi -L failed)"
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tail -1
    echo "nvcc: $(command -v nvcc || echo 'not on the PATH') $(nvcc --version 2>/dev/null | tail -2 | head -1)"
    echo "gcc: $(gcc --version 2>/dev/null | head -1); glibc $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')"
    echo "mpirun: $(command -v mpirun || echo none); mpicc: $(command -v mpicc || echo none); compute-sanitizer: $(command -v compute-sanitizer || echo none)"
    echo "python3: $(command -v python3) $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1)"
    echo "TORCH_PYTHON: $TORCH_PY"
    echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
    echo "tree: $BENCH_REV; prebuilt: $(head -1 "$PREP/MANIFEST.txt" 2>/dev/null || echo none)"
}

# One step: run under its limit (and the deadline) in the background, its log to $W/logs/NN_name.txt; step_finish
# waits for it and adds its line to summary.txt. A step marked "beside" (the attention check: its float64 reference
# on one CPU core takes ~45 s at T=1024) runs while the next step does, and is waited for after it.
STEP_NO=0
declare -A STEP_PID STEP_LOG STEP_T0 STEP_LIMIT
step_start() {  # name, limit, command
    local name=$1 limit=$2 cmd=$3
    STEP_NO=$((STEP_NO + 1))
    local log; log="$W/logs/$(printf %02d $STEP_NO)_$name.txt"
    local left=$((DEADLINE - SECONDS - 3))
    if [ $left -lt 5 ]; then
        echo "$name: not run, the ${BUDGET} s were spent" | tee -a "$DST/summary.txt"; return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name, limit ${limit} s, $(date -u +%T): $cmd" > "$log"
    case "$cmd" in
        probe|prep_step)   # functions of this script, run in a child bash
            export -f "$cmd" restore_prebuilt check_runs llmc_libs human
            export PREP W BENCH_REV TORCH_PY OLD_SRC OLD_STAMP OLD_BIN ROOT
            cmd="$(declare -p CUDA_BINS MAKE_CONF); $cmd" ;;
    esac
    timeout -k 5 "$limit" bash -c "$cmd" >> "$log" 2>&1 &
    STEP_PID[$name]=$! STEP_LOG[$name]=$log STEP_T0[$name]=$SECONDS STEP_LIMIT[$name]=$limit
}
step_finish() {  # name
    local name=$1 rc
    [ -n "${STEP_PID[$name]:-}" ] || return 0
    wait "${STEP_PID[$name]}"; rc=$?
    local log=${STEP_LOG[$name]} why="exit $rc"
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="STOPPED at its ${STEP_LIMIT[$name]} s limit (a hang, or too slow)"
    local last; last=$(grep -vE '^\s*$' "$log" | tail -1 | cut -c1-160)
    echo "$name: $why, $((SECONDS - STEP_T0[$name])) s | $last" | tee -a "$DST/summary.txt"
    # headline lines into the summary: the tests' verdicts, the bench's rows
    case "$name" in
        test_gpu) grep -E '^(FAIL|SKIP)|passed, ' "$log" | sed 's/^/    /' >> "$DST/summary.txt" ;;
        attention_check) grep -E '^FAIL|check\(s\) failed' "$log" | sed 's/^/    /' >> "$DST/summary.txt" ;;
        bench|llama|levers) grep -E 'ms/step|speed|failed|not run|stopped|parameters:' "$log" | grep -v '^==' | head -30 | sed 's/^/    /' >> "$DST/summary.txt" ;;
        pt_warm) grep -E '^pytorch |rror' "$log" | head -4 | sed 's/^/    /' >> "$DST/summary.txt" ;;
        # attention: the header and the rows at T=1024, hs 64 (GPT-2's, and the grouped-query rows; the goals are set at B=8)
        attention_sdpa) grep -E '^(bench|sdpa) .*(TFLOP|  1024  12( \(KV [0-9]+\))?   64 \|)|n/a|failed|rror' "$log" | head -20 | sed 's/^/    /' >> "$DST/summary.txt" ;;
        attention_sweep) grep -E '^(sweep .*hs= 64 causal|best |FAIL)|rror' "$log" | head -12 | sed 's/^/    /' >> "$DST/summary.txt" ;;
        kernels) grep -E 'TFLOP|rror|^Llama kernels|rmsnorm|rope_forward|swiglu' "$log" | head -32 | sed 's/^/    /' >> "$DST/summary.txt" ;;
    esac
    local h; h=$(headline "$name")
    [ -n "$h" ] && cp "$log" "$DST/$h"
    local bf; for bf in dev/bench/bench_gpu_*.txt; do
        [ -f "$bf" ] && [ "$bf" -nt "$W/started" ] && cp "$bf" "$DST/"
    done
    tar -czf "$DST/.logs.tar.gz.tmp" -C "$W" logs 2>/dev/null && mv "$DST/.logs.tar.gz.tmp" "$DST/logs.tar.gz"
    unset "STEP_PID[$name]"
    return 0
}

# what travels with the device tool: the working tree (tracked files and untracked ones git does not ignore),
# shared/ if the checkout has one, and the carried paths
travel_report() {
    local tree carry total
    tree=$(git ls-files -z -co --exclude-standard 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
    echo "what travels:"
    echo "  working tree (tracked + untracked not ignored): $(git ls-files -co --exclude-standard | wc -l) files, $(human "$tree")"
    total=$tree
    if [ -d shared ]; then local sh; sh=$(du -sb shared | cut -f1); echo "  shared/: $(human "$sh")"; total=$((total + sh)); fi
    if [ -d "$PREP" ]; then
        carry=$(du -sb "$PREP" | cut -f1); total=$((total + carry))
        echo "  carry $PREP: $(human "$carry")"
        du -sb "$PREP"/bin "$PREP"/base "$PREP"/llmc/train_gpt2cu "$PREP"/llmc/src "$PREP"/llmc/cudnn-frontend 2>/dev/null | while read -r s p; do echo "    $p: $(human "$s")"; done
    else
        echo "  carry $PREP: MISSING (run: bash dev/gpu_session.sh prepare)"
    fi
    echo "  total: $(human "$total") of 64 MiB: $([ "$total" -le $CARRY_LIMIT ] && echo within || echo OVER THE LIMIT)"
    echo "data: none travels: the tests train on the built-in synthetic corpus and the PyTorch reference's random"
    echo "  model; the benchmarks make a random shard there (dev/rand_shard.py, 32 MiB, ~10 s); no GPT-2 files needed"
}

# the dry run's rehearsal: the tree as it travels, plus .bench, copied to /tmp with today's dates; restore_prebuilt
# there; then what make computes with mpicc off the PATH (the GPU machine has none) and what it would rebuild
rehearse() {
    local sim; sim=$(mktemp -d /tmp/gpu_session_sim.XXXXXX)
    git ls-files -z -co --exclude-standard | xargs -0 -r cp --parents -t "$sim" 2>/dev/null
    cp -r "$PREP" "$sim/"
    local farm="$sim/.nompi" nvdir; nvdir=$(dirname "$(command -v nvcc)")
    mkdir -p "$farm"
    local d f
    IFS=: read -ra dirs <<< "$PATH"
    for d in "${dirs[@]}"; do
        [ -d "$d" ] && [ "$d" != "$nvdir" ] || continue
        for f in "$d"/*; do
            case "$(basename "$f")" in mpi*|ompi*|orte*|opal*|oshcc*|oshrun*) continue ;; esac
            [ -x "$f" ] && [ ! -e "$farm/$(basename "$f")" ] && ln -s "$f" "$farm/$(basename "$f")"
        done
    done
    (
        cd "$sim" || exit 1
        export PATH="$nvdir:$farm"   # nvcc where it is: the stamp names it by its path
        echo "rehearsal in a copy of what travels ($sim), PATH without mpicc (mpicc: $(command -v mpicc || echo none)):"
        restore_prebuilt | sed 's/^/  /'
        # (make writes the stamp it computes: the prebuilt one, and its date, are put back after this look)
        cp -p .build-cuda .build-cuda.keep
        echo "  make's own view, no MPICC=/URING= given: $(make -s print-config | grep '^cuda: ' | grep -oE '\| mpi.*')"
        mv .build-cuda.keep .build-cuda
        echo "    (no mpicc on this PATH: no MPI, as on the GPU machine; liburing is installed here, the GPU image has"
        echo "    none, and URING= is given on every make command line of the session anyway)"
        local got want; got=$(make -s "${MAKE_CONF[@]}" print-config | sed -n 's/^cuda: //p'); want=$(cat "$PREP/build-cuda")
        echo "  stamp make computes there: $got"
        [ "$got" = "$want" ] && echo "  = the prebuilt binaries' stamp: match" || echo "  DIFFERS from the prebuilt binaries' stamp: $want (everything would rebuild)"
        local n; n=$(NVCC_ARCH="$ARCH_90A" make -n "${MAKE_CONF[@]}" "${CUDA_BINS[@]}" 2>&1 | grep -c 'nvcc')
        echo "  make -n ${CUDA_BINS[*]}: $n nvcc command(s) $([ "$n" -eq 0 ] && echo '(nothing rebuilds)' || echo '(these rebuild)')"
        NVCC_ARCH="$ARCH_90A" make -n "${MAKE_CONF[@]}" "${CUDA_BINS[@]}" 2>&1 | grep -oE ' -o [^ ]+' | sed 's/^/   /'
        echo "  make -n train_gpt_cpu: $(make -n "${MAKE_CONF[@]}" train_gpt_cpu | grep -c ' -o train_gpt_cpu') gcc command (built there, ~3 s)"
        # and the other way: a source changed after prepare (a line added to test/test_generate.c) rebuilds its binary
        echo "// changed" >> test/test_generate.c
        restore_prebuilt > /dev/null
        echo "  with test/test_generate.c changed after prepare, make -n rebuilds:$(NVCC_ARCH="$ARCH_90A" make -n "${MAKE_CONF[@]}" "${CUDA_BINS[@]}" 2>&1 | grep -oE ' -o [^ ]+' | sed 's/ -o / /' | tr -d '\n')"
    )
    rm -rf "$sim"
}

# ---------------------------------------------------------------------------------------------------------------
[ "$mode" = prepare ] && { prepare; exit $?; }

DST=${OUT:-dev/bench/session}
export BENCH_REV=${BENCH_REV:-$(cat "$PREP/rev" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
# the GPU's architecture: sm_90a for an H100 or H200; another card gets its own (and so a rebuild: the stamp differs)
CC_GPU=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
if [ -n "$CC_GPU" ] && [ "$CC_GPU" != 90 ]; then export NVCC_ARCH="-gencode arch=compute_$CC_GPU,code=sm_$CC_GPU"; else export NVCC_ARCH="$ARCH_90A"; fi
# the Python that holds PyTorch (the GPU machine's python3; here /usr/bin/python3)
TORCH_PY=${TORCH_PYTHON:-}
if [ -z "$TORCH_PY" ]; then
    for p in python3 /usr/bin/python3; do "$p" -c 'import torch' > /dev/null 2>&1 && TORCH_PY=$(command -v "$p") && break; done
    TORCH_PY=${TORCH_PY:-python3}
fi
export TORCH_PY
# the CUDA toolkit's bin on the PATH (the stamp names nvcc by its path)
[ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc > /dev/null && export PATH="/usr/local/cuda/bin:$PATH"

plan
case "$mode" in
    all) run_steps=(probe prep attention_check pt_warm test_gpu bench llama attention_sdpa attention_sweep kernels levers) ;;
    check) run_steps=(probe prep attention_check test_gpu attention_sdpa attention_sweep); BUDGET=580 ;;
    bench) run_steps=(probe prep bench llama kernels); BUDGET=580 ;;
    levers) run_steps=(probe prep levers); BUDGET=580 ;;
esac

if [ "$DRY" = 1 ]; then
    echo "dry run of 'bash dev/gpu_session.sh $mode' (nothing is run; the commands run in the repository root there,"
    echo "W = a work folder, OUT = the device tool's folder that comes back):"
    total=0 beside_max=0
    for s in "${STEPS[@]}"; do
        IFS='|' read -r name limit cmd how <<< "$s"
        printf '%s\n' "${run_steps[@]}" | grep -qx "$name" || continue
        # a step beside the next runs while it does: the group costs its longest limit
        if [ "$how" = beside ]; then
            cmd="(beside the next step) $cmd"; [ "$limit" -gt $beside_max ] && beside_max=$limit
        else
            total=$((total + (limit > beside_max ? limit : beside_max))); beside_max=0
        fi
        case "$cmd" in
            probe) cmd="probe: nvidia-smi, nvcc, gcc, mpirun, python3/torch, cpu (function probe)" ;;
            prep_step) cmd="prep: restore_prebuilt; make -j\$(nproc) ${MAKE_CONF[*]} ${CUDA_BINS[*]} train_gpt_cpu; the binaries that do not run rebuilt; llm.c's libraries checked; python3 dev/rand_shard.py \$W/rand.bin" ;;
        esac
        printf '  %-16s %4d s  %s\n' "$name" "$limit" "$cmd"
    done
    echo "  total of the limits, one after another: $total s of $BUDGET s (9 min = 540 s): $([ $total -le "$BUDGET" ] && echo within || echo OVER)"
    echo "  (the attention check and pt_warm run beside make test-gpu and are waited for after it: the group costs its"
    echo "  longest limit; pt_warm's compiles fill torch.compile's cache in \$W/inductor for the timed PyTorch rows)"
    echo "  each step also stops at the deadline (start + $BUDGET s): a slow step costs the ones after it, levers first"
    echo "back in \$OUT (8 files at most): summary.txt, logs.tar.gz, device.txt, attention_check.txt, test_gpu.txt,"
    echo "  bench_gpu_<card>.txt, levers.txt"
    travel_report
    echo "prebuilt binaries ($PREP):"
    if [ -f "$PREP/MANIFEST.txt" ]; then
        sed 's/^/  /' "$PREP/MANIFEST.txt" | grep -v '^  sources:'
        miss=0; for b in "${CUDA_BINS[@]}"; do [ -x "$PREP/bin/$b" ] || { echo "  MISSING: $PREP/bin/$b"; miss=1; }; done
        [ -x "$PREP/llmc/train_gpt2cu" ] || { echo "  MISSING: $PREP/llmc/train_gpt2cu (llm.c would be built there)"; miss=1; }
        [ -x "$PREP/base/train_gpt" ] || echo "  no $PREP/base/train_gpt: the levers run without a base row"
        [ $miss -eq 0 ] && echo "  all 5 binaries and llm.c's train_gpt2cu present"
        rehearse
    else
        echo "  MISSING: run 'bash dev/gpu_session.sh prepare' (or make gpu-prepare) first"
    fi
    echo "the device tool's call: run(command=\"bash dev/gpu_session.sh all\", carry=[\"$PREP\"], timeout_s=600)"
    exit 0
fi

mkdir -p "$DST"
W=$(mktemp -d /tmp/gpu_session.XXXXXX)
mkdir -p "$W/logs"
touch "$W/started"
export W
# one torch.compile cache for the session: pt_warm fills it, the timed PyTorch rows (GPT-2's, the Llama's) read it
export TORCHINDUCTOR_CACHE_DIR="$W/inductor"
DEADLINE=$((SECONDS + BUDGET))
echo "== $(date -u +%FT%TZ) gpu_session.sh $mode at $BENCH_REV, budget $BUDGET s, on $(nvidia-smi -L 2>/dev/null | head -1)" | tee -a "$DST/summary.txt"
beside=()
for s in "${STEPS[@]}"; do
    IFS='|' read -r name limit cmd how <<< "$s"
    printf '%s\n' "${run_steps[@]}" | grep -qx "$name" || continue
    step_start "$name" "$limit" "$cmd" || continue
    if [ "$how" = beside ]; then beside+=("$name"); continue; fi
    step_finish "$name"
    for b in "${beside[@]}"; do step_finish "$b"; done
    beside=()
done
for b in "${beside[@]}"; do step_finish "$b"; done
echo "== done after $SECONDS s; logs in $DST/logs.tar.gz" | tee -a "$DST/summary.txt"
