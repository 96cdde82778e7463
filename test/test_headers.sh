#!/usr/bin/env bash
# test_headers.sh: every header stands alone. Each one is compiled as a translation unit of its own
# (-fsyntax-only), with nothing before it, by the compiler and flags of the build that uses it: the top-level
# headers, cpu/ and tokenizer/ as C with the CPU build's (make passes HEADER_CC, HEADER_CFLAGS), cuda/ as C++ with the
# emulator's (HEADER_CXX, HEADER_CXXFLAGS; -include dev/cuda/emu/emu.h stands in for what nvcc includes
# before every file, the CUDA runtime). A header that needs a type, a function or a macro it does not include,
# or that only compiles after another header (an include-order contract), fails here.
# One diagnostic is accepted, and only for functions backend/backend.h declares: "used but never defined". backend/backend.h is
# the contract a build implements (train_gpt.c with cpu/, train_gpt.cu with cuda/), so in a header compiled
# without a build its functions are declared, typed and called, and their definitions are the build's.
# Any other warning fails the header, as an error does.
source "$(dirname "$0")/lib.sh"
CC_=${HEADER_CC:-cc}
CFLAGS_=${HEADER_CFLAGS:--std=gnu11 -Wall -Wextra -Wno-unused-function -fopenmp -D_GNU_SOURCE}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CXX_=${HEADER_CXX:-g++}
CXXFLAGS_=${HEADER_CXXFLAGS:--std=c++17 -fopenmp -Wall -Wextra -Wno-unused-function -Wno-missing-field-initializers \
-Wno-unknown-pragmas -Wno-class-memaccess -fno-strict-aliasing -DTRAIN_GPT_CUDA -isystem $CUDA_HOME/include}

# check HEADER COMPILER...: PASS when the header compiles alone with no diagnostic but the accepted one
check() {
  local h=$1; shift
  local out; out=$("$@" -fsyntax-only "$h" 2>&1); local rc=$?
  local rest; rest=$(grep -E '(error|warning):' <<<"$out" | grep -vE "^([^:]*/)?backend\.h:[0-9]+:[0-9]+: warning: .[a-z_0-9]+. used but never defined$")
  if [ $rc -eq 0 ] && [ -z "$rest" ]; then ok "$h compiles alone"
  else bad "$h does not compile alone" "$(grep -E '(error|warning):' <<<"$out" | head -4)"; fi
}

for h in ./*.h $(printf "%s/*.h " $SHARED_DIRS) cpu/*.h tokenizer/*.h; do
  h=${h#./}
  # shellcheck disable=SC2086
  check "$h" $CC_ $CFLAGS_ -x c
done
if [ -f "$CUDA_HOME/include/cuda_bf16.h" ]; then
  for h in cuda/*.cuh; do
    # shellcheck disable=SC2086
    check "$h" $CXX_ $CXXFLAGS_ -I. -x c++ -include dev/cuda/emu/emu.h
  done
else
  n=$(ls cuda/*.cuh | wc -l)  # one SKIP for the lot: one cause, one line
  skip "cuda/*.cuh alone ($n headers): no CUDA toolkit headers in $CUDA_HOME/include (the emulator compiles cuda/ with them; install NVIDIA's CUDA toolkit, or set CUDA_HOME)"
fi
finish
