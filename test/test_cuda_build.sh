#!/usr/bin/env bash
# test_cuda_build.sh: what can be checked of the CUDA build on a machine without a GPU: it compiles
# for sm_80 and sm_90a with no warnings, --help works, and training stops with a one-line error.
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -8 | sed 's/^/    /'; fail=$((fail+1)); }
if ! command -v nvcc >/dev/null; then bad "nvcc is not on the PATH"; echo "$pass passed, $fail failed"; exit 1; fi
rm -f train_gpt
t0=$SECONDS
out=$(make train_gpt 2>&1); rc=$?
took=$((SECONDS - t0))
warnings=$(grep -iE "warning|error" <<<"$out")
[ $rc -eq 0 ] && [ -z "$warnings" ] && grep -q "sm_80" <<<"$out" && grep -q "sm_90a" <<<"$out" \
  && ok "make train_gpt: nvcc for sm_80 and sm_90a, no warnings, ${took} s" || bad "make train_gpt without warnings (rc $rc)" "$warnings"
out=$(./train_gpt --help 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q -- "--zero-stage" <<<"$out" && ok "./train_gpt --help works without a GPU" || bad "./train_gpt --help" "$out"
out=$(./train_gpt --bogus 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown flag '--bogus'" <<<"$out" && ok "flag errors come before any device is needed" || bad "flag errors without GPU" "$out"
if ! nvidia-smi -L >/dev/null 2>&1; then
  out=$(./train_gpt -x 1 2>&1); rc=$?
  lines=$(wc -l <<<"$out")
  [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -qE "^error: no (usable )?CUDA device" <<<"$out" \
    && ok "without a GPU, training stops with one line: $out" || bad "no-GPU error is one line" "$out"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
