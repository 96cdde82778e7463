#!/usr/bin/env bash
# dev/cuda/emu/barrier_mutants.sh: does the emulated test matrix notice a missing barrier? Deletes each
# __syncthreads(), __syncwarp() and __threadfence() of the CUDA build's kernels (cuda/*.cuh), and each call of
# cuda/block_order.cuh's block_order_wait and block_order_release (a block's wait for its turn, the passing on), in turn and runs, on the mutant, what
# make test-cuda-emu runs of the kernels: the race-detector build of the kernel checks (check edges, muon, classifier),
# then the plain build whole in forward thread order and check edges in another. Prints one line per barrier saying which of them caught it, and a summary; exits non-zero if any
# deletion went unnoticed. Takes a few minutes per barrier on 2 cores (nice'd); not part of CI.
#   bash dev/cuda/emu/barrier_mutants.sh            # every barrier
#   bash dev/cuda/emu/barrier_mutants.sh cuda/attention_fp32.cuh:160 cuda/norms.cuh:95   # only these (file:line)
#   CHECKS=attention bash dev/cuda/emu/barrier_mutants.sh cuda/attention_mma.cuh:332   # the attention check instead
# CHECKS=attention runs dev/cuda/attention_emu (and _race) `check small` (float64 reference, every head size, T up
# to 256) in place of the kernel checks, and stops each run at its first failure: about 3 minutes a barrier, not 10.
# CHECKS=llama runs only the Llama family's kernel checks (`kernels_emu check llama`: cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh, grouped-query
# attention and its decoder against cpu/norms.h, cpu/rope.h, cpu/activations.h), for the barriers of cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh and the GQA paths.
#   CHECKS=llama bash dev/cuda/emu/barrier_mutants.sh $(grep -n -E '__syncthreads\(\);' cuda/norms.cuh | cut -d: -f1 | sed 's|^|cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh:|')
set -u
cd "$(dirname "$0")/../../.."
W=$(mktemp -d /tmp/barrier_mutants.XXXXXX)
trap 'rm -rf "$W"' EXIT
make -s build/emu/emu.o build/emu/emu_threads.o build/emu/emu_blocks.o build/emu/emu_queue.o build/emu/emu_race.o \
  build/emu/cublaslt.o build/emu/nccl.o || exit 1
lines=("$@")
BARRIER='__syncthreads\(\);|__syncwarp\(\);|__threadfence\(\);|block_order_(wait|release)\([^;]*\);'
[ ${#lines[@]} -eq 0 ] && mapfile -t lines < <(grep -n -E "$BARRIER" cuda/*.cuh | cut -d: -f1,2)
caught=0; missed=0
for FL in "${lines[@]}"; do
  F=${FL%%:*} L=${FL#*:}
  rm -rf "$W/m" && mkdir -p "$W/m/build" "$W/m/dev"
  # every tracked file as it is here (the layers' folders and what they include), and the emulator's objects
  git ls-files -z | xargs -0 cp --parents -t "$W/m/" && cp -r build/emu "$W/m/build/"
  what=$(sed -n "${L}p" "$F" | sed -E 's/^ +//')
  sed -i -E "${L}s/$BARRIER/; \/* barrier deleted *\//" "$W/m/$F"
  if [ "${CHECKS:-kernels}" = attention ]; then bins="dev/cuda/attention_emu dev/cuda/attention_emu_race"; run="check small"
  elif [ "${CHECKS:-kernels}" = llama ]; then bins="dev/cuda/kernels_emu dev/cuda/kernels_emu_race"; run="check llama"
  else bins="dev/cuda/kernels_emu dev/cuda/kernels_emu_race"; run="check"; fi
  if ! (cd "$W/m" && nice make -s $bins > build.log 2>&1); then
    echo "$F:$L: the mutant does not build"; tail -5 "$W/m/build.log"; missed=$((missed + 1)); continue
  fi
  plain=${bins%% *} race=${bins##* }
  by=()
  if [ "${CHECKS:-kernels}" = attention ]; then  # the first failure is enough (grep -m1 ends the run)
    out=$(cd "$W/m" && nice ./$race $run 2>&1 | grep -m1 -oE 'cuda-emu: .{0,160}|^FAIL.{0,120}')
    [ -n "$out" ] && by+=("race detector: $out")
    for order in forward reverse; do
      out=$(cd "$W/m" && TRAIN_GPT_EMU_ORDER=$order nice ./$plain $run 2>&1 | grep -m1 -oE 'cuda-emu: .{0,120}|^FAIL.{0,120}')
      [ -n "$out" ] && by+=("attention checks in $order order: $out")
    done
  else
    # as make test runs them (test/cuda_emu_kernels.sh): the race detector on check edges, muon and classifier (the
    # kernel checks' own list: CHECKS=llama runs check llama), the plain build whole in the forward order and on
    # check edges in another
    rsets=("edges" "muon" "classifier"); [ "$run" = check ] || rsets=("${run#check }")
    for set in "${rsets[@]}"; do
      out=$(cd "$W/m" && nice ./$race check $set 2>&1)
      [ $? -ne 0 ] && { by+=("race detector (check $set): $(grep -m1 -oE 'cuda-emu: .{0,160}' <<<"$out" || grep -m1 FAIL <<<"$out")"); break; }
    done
    for order in forward random:11; do
      oset=$run; [ "$order" = forward ] || { [ "$run" = check ] && oset="check edges"; }
      out=$(cd "$W/m" && TRAIN_GPT_EMU_ORDER=$order nice ./$plain $oset 2>&1)
      [ $? -ne 0 ] && by+=("kernel checks in $order order ($oset): $(grep -m1 -E 'cuda-emu|FAIL' <<<"$out" | cut -c1-120)")
    done
  fi
  if [ ${#by[@]} -gt 0 ]; then
    caught=$((caught + 1)); echo "CAUGHT $F:$L ($what)"
  else
    missed=$((missed + 1)); echo "MISSED $F:$L ($what)"
  fi
  for b in "${by[@]}"; do echo "    $b"; done
done
echo "$caught of $((caught + missed)) deleted barriers caught"
[ $missed -eq 0 ]
