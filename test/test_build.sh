#!/usr/bin/env bash
# test_build.sh: the build follows the machine. In a copy of the sources: a second make is a no-op;
# a change of configuration (flags, or mpicc appearing or going: MPICC= stands for a machine
# without it) rebuilds; --help tells whether the binary has MPI; and a binary without MPI started
# by mpirun as 2 ranks stops with an error instead of running two independent copies.
source "$(dirname "$0")/lib.sh"
mkdir -p "$W/src"
cp -p Makefile ./*.c ./*.h "$W/src/" && cp -rp cpu tokenizer "$W/src/"
build() { make --no-print-directory -C "$W/src" "$@" train_gpt_cpu 2>&1; }
uptodate() { make --no-print-directory -C "$W/src" -q "$@" train_gpt_cpu; }
mpi_of() { "$W/src/train_gpt_cpu" --help | sed -nE 's/.*MPI: (yes|no).*/\1/p'; }

build MPICC= >/dev/null
uptodate MPICC=; up=$?
[ -x "$W/src/train_gpt_cpu" ] && [ $up -eq 0 ] && [ "$(mpi_of)" = no ] \
  && ok "built without mpicc: --help says 'MPI: no', and a second make has nothing to do" || bad "first build (up to date: $up, MPI: $(mpi_of))"
uptodate MPICC= CFLAGS="-O1 -fopenmp"; changed=$?
uptodate MPICC=; again=$?
build MPICC= >/dev/null
[ $changed -ne 0 ] && [ $again -ne 0 ] && ok "other CFLAGS rebuild, and so does going back to the old ones" \
  || bad "a flag change rebuilds (after -O1: $changed, back: $again)"
if have_mpi "a binary without MPI under mpirun"; then
  out=$("${MPI[@]}" -np 2 "$W/src/train_gpt_cpu" -x 2 -s 0 -o "$W/out" 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q "this binary was built without MPI, but a launcher started it as one of 2 ranks" <<<"$out" \
    && [ -z "$(ls -A "$W/out" 2>/dev/null)" ] && ! grep -q "^step" <<<"$out" \
    && ok "a binary without MPI started by mpirun -np 2 stops with an error, training and writing nothing" \
    || bad "non-MPI binary under mpirun" "$out"
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
out=$(OMP_NUM_THREADS=1 "$W/src/train_gpt_cpu" "${d2[@]}" --offload optimizer --offload-device nvme --nvme-path "$W/disk" --log "$W/nv.jsonl" 2>&1)
OMP_NUM_THREADS=1 "$W/src/train_gpt_cpu" "${d2[@]}" --log "$W/no.jsonl" > /dev/null 2>&1
losses() { grep -o '"loss": [0-9.e-]*, "lr": [0-9.e-]*, "norm": [0-9.e-]*' "$1"; }
grep -qF "pread/pwrite (this build has no liburing: apt-get install liburing-dev, then make)" <<<"$out" && [ -s "$W/nv.jsonl" ] \
  && [ "$(losses "$W/nv.jsonl")" = "$(losses "$W/no.jsonl")" ] \
  && ok "built without liburing: --offload-device nvme uses pread/pwrite, says so and names the package, and trains bit-identically" \
  || bad "build without liburing" "$out"
# the backend contract (backend.h): the shared headers ask the build for everything through backend_* functions,
# so none of them names the CUDA runtime, NCCL, cuBLAS, the CUDA build's stream or its macro
leaks=$(grep -nE 'cuda[A-Z]|nccl[A-Z_]|cublas|main_stream|TRAIN_GPT_CUDA' "$(dirname "$0")"/../*.h "$(dirname "$0")"/../tokenizer/*.h)
[ -z "$leaks" ] && ok "no shared header calls CUDA or NCCL or tests TRAIN_GPT_CUDA: the build is reached through backend.h" \
  || bad "the backend contract leaks" "$leaks"
finish
