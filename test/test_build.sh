#!/usr/bin/env bash
# test_build.sh: the build follows the machine. In a copy of the sources: a second make is a no-op;
# a change of configuration (flags, or mpicc appearing or going: MPICC= stands for a machine
# without it) rebuilds; --help tells whether the binary has MPI; and a binary without MPI started
# by mpirun as 2 ranks stops with an error instead of running two independent copies. A header
# touched rebuilds exactly what includes it (the compiler's dependencies, -MMD); the emulated CUDA
# build has its configuration stamp too (built before Open MPI, rebuilt whole after it, and linked);
# without the CUDA headers make train_gpt_emu says so; and no build of any configuration make supports (with and
# without MPI and liburing) warns.
source "$(dirname "$0")/lib.sh"
S=$W/src
mkdir -p "$S/test"
cp -p Makefile ./*.c ./*.h "$S/" && cp -rp $SHARED_DIRS cpu tokenizer "$S/" && cp -p test/*.c test/*.h "$S/test/"
EMU=""
if [ -e "${CUDA_HOME:-/usr/local/cuda}/include/cuda_bf16.h" ]; then
  EMU=1
  mkdir -p "$S/dev/cuda/emu" && cp -p train_gpt.cu "$S/" && cp -rp cuda "$S/" && cp -p dev/cuda/emu/*.cpp dev/cuda/emu/*.h "$S/dev/cuda/emu/"
fi
# build [VAR=VALUE...] [TARGET...]: make in the copy (train_gpt_cpu unless targets are given); its output is
# printed, and every warning in it is kept with the configuration that gave it
build() {
  local vars=() targets=() a out
  for a in "$@"; do case $a in *=*) vars+=("$a") ;; *) targets+=("$a") ;; esac; done
  out=$(make --no-print-directory -j2 -C "$S" "${vars[@]}" "${targets[@]:-train_gpt_cpu}" 2>&1)
  grep -i "warning" <<<"$out" | sed "s|^|[${vars[*]:-default}] |" >> "$W/warnings"
  echo "$out"
}
uptodate() { make --no-print-directory -C "$S" -q "$@" train_gpt_cpu; }
mpi_of() { "$S/${1:-train_gpt_cpu}" --help | sed -nE 's/.*MPI: (yes|no).*/\1/p'; }

build MPICC= >/dev/null
uptodate MPICC=; up=$?
[ -x "$S/train_gpt_cpu" ] && [ $up -eq 0 ] && [ "$(mpi_of)" = no ] \
  && ok "built without mpicc: --help says 'MPI: no', and a second make has nothing to do" || bad "first build (up to date: $up, MPI: $(mpi_of))"
# (the binary without MPI under mpirun before the flag checks below: asking make about other flags rewrites the
# configuration stamp, after which this configuration would have to be compiled a second time to run it)
mpi=""; have_mpi "a binary without MPI under mpirun, and one rebuilt with MPI" && mpi=1
if [ -n "$mpi" ]; then
  out=$("${MPI[@]}" -np 2 "$S/train_gpt_cpu" -x 2 -s 0 -o "$W/out" 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q "this binary was built without MPI, but a launcher started it as one of 2 ranks" <<<"$out" \
    && [ -z "$(ls -A "$W/out" 2>/dev/null)" ] && ! grep -q "^step" <<<"$out" \
    && ok "a binary without MPI started by mpirun -np 2 stops with an error, training and writing nothing" \
    || bad "non-MPI binary under mpirun" "$out"
fi
uptodate MPICC= CFLAGS="-O1 -fopenmp"; changed=$?
uptodate MPICC=; again=$?
[ $changed -ne 0 ] && [ $again -ne 0 ] && ok "other CFLAGS rebuild, and so does going back to the old ones" \
  || bad "a flag change rebuilds (after -O1: $changed, back: $again)"
if [ -n "$mpi" ]; then
  out=$(build)
  [ "$(mpi_of)" = yes ] && grep -q -- "-DUSE_MPI" <<<"$out" \
    && ok "with mpicc on the PATH the same make rebuilds it with MPI ('MPI: yes'), without make clean" \
    || bad "rebuild with MPI" "$out"
fi
# a machine without liburing-dev (URING= stands for it): the build still works, --offload-device nvme reads and
# writes its swap file with pread/pwrite, says so, and trains the same numbers
build URING= >/dev/null
mkdir -p "$W/disk"
d2=(-e d2 -b 2 -t 32 -x 3 -v 0 -s 0)
out=$(OMP_NUM_THREADS=1 "$S/train_gpt_cpu" "${d2[@]}" --offload optimizer --offload-device nvme --nvme-path "$W/disk" --log "$W/nv.jsonl" 2>&1)
OMP_NUM_THREADS=1 "$S/train_gpt_cpu" "${d2[@]}" --log "$W/no.jsonl" > /dev/null 2>&1
losses() { grep -o '"loss": [0-9.e-]*, "lr": [0-9.e-]*, "norm": [0-9.e-]*' "$1"; }
grep -qF "pread/pwrite (this build has no liburing: apt-get install liburing-dev, then make)" <<<"$out" && [ -s "$W/nv.jsonl" ] \
  && [ "$(losses "$W/nv.jsonl")" = "$(losses "$W/no.jsonl")" ] \
  && ok "built without liburing: --offload-device nvme uses pread/pwrite, says so and names the package, and trains bit-identically" \
  || bad "build without liburing" "$out"
# the fourth configuration (neither), and every other program of the CPU build in it and in the machine's own
build MPICC= URING= > /dev/null
TESTS=(tokenize test/test_gpt2 test/test_units test/test_pipeline test/test_generate test/hf_forward test/test_llama_cpu test/test_arch)
build MPICC= URING= "${TESTS[@]}" > /dev/null
# the machine's own configuration: make test has just built them (build/test-bins.log, its output); run alone, this
# suite builds them in the copy
# (the dependency check below then reads the copy in the configuration it was last built in)
last=()
if grep -qE -- "-o test/test_arch( |$)" build/test-bins.log 2>/dev/null; then
  grep -i "warning" build/test-bins.log | sed "s|^|[make test's build] |" >> "$W/warnings"
  last=(MPICC= URING=)
else build train_gpt_cpu "${TESTS[@]}" > /dev/null; fi

# dependencies from the compiler: a header touched rebuilds what includes it and nothing else (test_llama_cpu
# once ran stale after an edit of cpu/attention.h, which its hand-written list lacked)
sleep 1; touch "$S/cpu/attention.h"
q() { make --no-print-directory -C "$S" -q "${last[@]}" "$1"; echo $?; }
deps="train_gpt_cpu $(q train_gpt_cpu), test/test_llama_cpu $(q test/test_llama_cpu), test/test_gpt2 $(q test/test_gpt2), test/test_pipeline $(q test/test_pipeline), tokenize $(q tokenize)"
[ "$deps" = "train_gpt_cpu 1, test/test_llama_cpu 1, test/test_gpt2 1, test/test_pipeline 0, tokenize 0" ] \
  && ok "touching cpu/attention.h puts train_gpt_cpu, test/test_llama_cpu and test/test_gpt2 out of date, not test_pipeline or tokenize" \
  || bad "header dependencies (make -q after touching cpu/attention.h, 1 = out of date)" "$deps"

# the emulated CUDA build, first on a machine without Open MPI or liburing, then with both: the configuration
# stamp rebuilds every emulator object (build/emu/nccl.o from before MPI once failed to link: undefined
# ncclGetErrorString) and binary, and the binary has MPI. The first at -O3, what nvcc gives the host compiler:
# the GPU machine builds train_gpt without MPI, where g++ -O3 once warned (zero.h: `all` may be used uninitialized)
if [ -z "$EMU" ]; then
  skip "the emulated build's configuration stamp: no CUDA headers in ${CUDA_HOME:-/usr/local/cuda}/include (make train_gpt_emu needs them)"
else
  build MPICC= URING= EMU_OPT="-O3 -march=native -mno-red-zone" train_gpt_emu > /dev/null
  first=$(mpi_of train_gpt_emu)
  plan=$(make --no-print-directory -C "$S" -n train_gpt_emu 2>&1)
  recompiled=$(grep -c -- "-c dev/cuda/emu/.*\.cpp" <<<"$plan")
  relinked=$(grep -cE -- "-o train_gpt_emu( |$)" <<<"$plan")
  # the build with the machine's configuration: `make test` has just done it (build/test-bins-emu.log, its output); run
  # alone, this suite does it in the copy
  bins_log=build/test-bins-emu.log
  if grep -qE -- "-o train_gpt_emu( |$)" "$bins_log" 2>/dev/null; then
    grep -i "warning" "$bins_log" | sed "s|^|[make test's build] |" >> "$W/warnings"
    out=$(cat "$bins_log"); emu=./train_gpt_emu
  else out=$(build train_gpt_emu); emu=$S/train_gpt_emu; fi
  machine_mpi=$(command -v mpicc > /dev/null && echo yes || echo no)
  emu_mpi=$("$emu" --help | sed -nE 's/.*MPI: (yes|no).*/\1/p')
  if [ "$first" = no ] && [ "$recompiled" -eq 7 ] && [ "$relinked" -eq 1 ] && [ "$emu_mpi" = "$machine_mpi" ]; then
    ok "train_gpt_emu built without mpicc and liburing ('MPI: no'); with the machine's configuration all 7 emulator objects and the binary are rebuilt (make -n), and that build links with 'MPI: $emu_mpi'"
  else bad "the emulated build follows the configuration (first MPI: $first, objects recompiled: $recompiled of 7, binary relinked: $relinked, then MPI: $emu_mpi)" "$out"; fi
fi

# a machine without the CUDA toolkit's headers (CUDA_HOME= a directory without them): make train_gpt_emu, which the
# README offers to anyone without a GPU, names what is missing instead of a compiler error from each of its files
out=$(make --no-print-directory -C "$S" -j2 CUDA_HOME="$W/nocuda" train_gpt_emu 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF "no CUDA toolkit headers (cuda_bf16.h) in $W/nocuda/include" <<<"$out" && ! grep -qE "^(g\+\+|cc|gcc) " <<<"$out" \
  && ok "without the CUDA toolkit's headers, make train_gpt_emu stops before compiling, naming the headers and CUDA_HOME" \
  || bad "make train_gpt_emu without the CUDA headers (exit $rc)" "$out"

if [ ! -s "$W/warnings" ]; then
  ok "no warning from any build: train_gpt_cpu with and without MPI and liburing, tokenize and the tests with and without liburing$([ -n "$EMU" ] && echo ", train_gpt_emu without both (at -O3, as nvcc's host compiler) and with both")"
else bad "builds without warnings" "$(cat "$W/warnings")"; fi

# the backend contract (backend/backend.h): the shared headers ask the build for everything through backend_* functions,
# so none of them names the CUDA runtime, NCCL, cuBLAS, the CUDA build's stream or its macro
leaks=$(cd "$(dirname "$0")/.." && grep -nE 'cuda[A-Z]|nccl[A-Z_]|cublas|main_stream|TRAIN_GPT_CUDA' $(cd "$(dirname "$0")/.." && ls ./*.h tokenizer/*.h $(printf "%s/*.h " $SHARED_DIRS)))
[ -z "$leaks" ] && ok "no shared header calls CUDA or NCCL or tests TRAIN_GPT_CUDA: the build is reached through backend/backend.h" \
  || bad "the backend contract leaks" "$leaks"
finish
