# test/cuda_emu_kernels.sh: test_cuda_emu.sh's kernel group (`bash test/test_cuda_emu.sh kernels` runs it alone;
# make test runs it in its second lane), sourced by it: the emulator's own checks and the broken programs it must
# stop, every kernel against the CPU build's (dev/cuda/kernels.cu) in thread orders, under the race detector and
# AddressSanitizer, and the attention kernels against float64 in three block orders. Uses test_cuda_emu.sh's
# `summary` and `counts`.
kernels() {
  local out rc; mark start
  # the emulator itself: its checks, then programs a GPU would hang on, fault on or get wrong
  out=$(./dev/cuda/emu/selftest ok 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "emulator self-checks (shuffles, votes, barriers, NaN fill, limits, cp.async, ldmatrix, cuBLASLt): $(summary "$out")" \
    || bad "emulator self-checks" "$(grep -E 'FAIL|cuda-emu' <<<"$out")"
  local cases=("exited-lane:has exited while lanes" "different-collectives:are at different collectives"
    "barrier-skipped:is not reached by every thread" "deadlock:deadlock: no thread can go on"
    "shfl-unnamed:which the mask 0x0000ffff does not name"
    "host-pointer:neither device memory nor pinned" "copy-past-end:past the end of its allocation"
    "race@race:data race on a static __shared__ variable" "out-of-bounds@race:not allocated device memory"
    "cp-async-no-wait:exits with 1 cp.async copy in flight (committed, never waited for)"
    "cp-async-uncommitted:(some never committed)" "cp-async-no-barrier@race:data race on dynamic shared memory"
    "block-cycle:deadlock between blocks: 2 live blocks" "block-successor:TRAIN_GPT_EMU_RESIDENT=1 are live"
    "block-no-release@race:no kernel boundary or release/acquire pair" "block-no-acquire@race:no kernel boundary or release/acquire pair"
    "graph-freed:replays node 0 (write_through) on device memory" "graph-freed-copy:freed since the graph was captured: by cudaFree")
  for c in "${cases[@]}"; do
    local mode=${c%%:*} want=${c#*:} bin=./dev/cuda/emu/selftest
    [ "${mode#*@}" != "$mode" ] && bin=./dev/cuda/emu/selftest_race && mode=${mode%@*}
    out=$($bin "$mode" 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out" && ok "the emulator stops $mode: $(grep -m1 -o 'cuda-emu: .*' <<<"$out" | cut -c1-150)" \
      || bad "the emulator must stop $mode (exit $rc)" "$out"
  done; mark "the emulator's own checks"
  # blocks that wait on each other (cuda/block_order.cuh): in every block order, and ordered for the race detector
  local bo="" brc=0
  for order in forward reverse random:5; do
    out=$(TRAIN_GPT_EMU_ORDER=$order ./dev/cuda/emu/selftest blocks 2>&1) || brc=1
    bo+="$order: $(summary "$out"); "
  done
  out=$(./dev/cuda/emu/selftest_race blocks 2>&1) || brc=1
  bo+="race build: $(summary "$out")"
  [ $brc -eq 0 ] && ok "blocks that take turns through a counter, in every block order and under the race detector: $bo" \
    || bad "blocks that take turns through a counter" "$bo"
  # every kernel against the CPU build's, fp32/bf16/fp16, six shapes, and the Llama family's (cuda/norms.cuh, cuda/rope.cuh,
  # cuda/activations.cuh, grouped-query attention and decode) against cpu/norms.h, cpu/rope.h, cpu/activations.h: the
  # whole check in the forward order; in two other thread orders (a result that changes with the order is a race; the
  # reverse one is the AddressSanitizer build's run, whose numbers are checked as the plain build's), under
  # AddressSanitizer and under the race detector (every access of every thread), `check edges`: the kernels whose
  # threads share data, at the shapes of their edges (kernels.cu says which; the update's element-wise kernels and the
  # aligned shapes add nothing there). The race detector also runs `check muon` and `check classifier` (Muon's kernels
  # and the classifier at 50k-wide rows, which the edges do not run), so it meets every kernel with shared memory or a
  # barrier; the whole check under it (250 CPU s, issue 52) ran the aligned shapes and the rounding statistics again,
  # whose kernels the edges already run at ragged shapes
  local set
  for order in forward random:11; do
    set=edges; [ $order = forward ] && set=""
    out=$(TRAIN_GPT_EMU_ORDER=$order ./dev/cuda/kernels_emu check $set 2>&1); rc=$?
    [ $rc -eq 0 ] && ok "kernels vs the CPU build's, threads in $order order${set:+ (check $set)}: $(summary "$out")" \
      || bad "kernels vs the CPU build's ($order order${set:+, check $set})" "$(grep -E 'FAIL|cuda-emu|error' <<<"$out")"
  done
  [ -n "${VERBOSE:-}" ] && echo "$out" | sed 's/^/    /'; mark "kernels in two thread orders (one of them check edges)"
  local rr="" rrc=0
  for set in edges muon classifier; do
    out=$(./dev/cuda/kernels_emu_race check $set 2>&1) || { rrc=1; rr+="check $set: $(grep -E 'FAIL|cuda-emu|error' <<<"$out" | head -5); "; continue; }
    rr+="check $set: $(summary "$out"); "
  done
  [ $rrc -eq 0 ] && ok "kernels under the race detector (shared and device memory, every access): ${rr%; }" \
    || bad "kernels under the race detector" "$rr"; mark "kernels under the race detector (check edges, muon, classifier)"
  out=$(ASAN_OPTIONS=detect_leaks=0 TRAIN_GPT_EMU_ORDER=reverse ./dev/cuda/kernels_emu_asan check edges 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "kernels under AddressSanitizer, threads in reverse order (check edges): $(summary "$out")" \
    || bad "kernels under AddressSanitizer (reverse order)" "$(grep -E 'FAIL|ERROR|cuda-emu|error' <<<"$out" | head -5)"
  mark "kernels under AddressSanitizer in reverse order (check edges)"
  # the attention kernels against float64 at every head size, T up to 256, multi-head and grouped-query (4:1, 2:1, MQA);
  # every mask (causal, document, window, both) with each KV-stationary backward instantiation, the tiles each visits
  out=$(./dev/cuda/attention_emu check small 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "attention vs float64 (T <= 256, head sizes 16-128, GQA and MQA; every mask, the tiles visited = the visible ones): $(counts "$out")" \
    || bad "attention vs float64: $(counts "$out"), exit $rc" "$(grep -vE '^PASS|^device' <<<"$out")"
  # the 16-bit backwards whose blocks wait on each other (cuda/block_order.cuh), rerun (`check orders`: bf16, the shapes
  # with most blocks) in reverse block order and one block resident: each line, bits included, one of the run above
  local a0 a1 n1 arc=0 am=""
  bits() { grep -oE '^(PASS|FAIL) .*bits [0-9a-f]+' | sed -E 's/\| rel err.*bits/bits/'; }
  a0=$(bits <<<"$out")
  for env in TRAIN_GPT_EMU_ORDER=reverse TRAIN_GPT_EMU_RESIDENT=1; do
    a1=$(env $env ./dev/cuda/attention_emu check orders 2>&1) || { arc=1; am+="$env: exit status; "; }
    n1=$(bits <<<"$a1" | grep -c .)
    [ "$n1" -ge 15 ] && [ -z "$(bits <<<"$a1" | grep -vxF -f <(echo "$a0"))" ] || { arc=1; am+="$env: $n1 lines, other bits: $(bits <<<"$a1" | grep -vxF -f <(echo "$a0") | head -2); "; }
  done
  [ $arc -eq 0 ] && [ -n "$a0" ] && ok "attention's waiting backwards in reverse block order and one block resident: the same bits ($n1 checks each)" \
    || bad "attention in other block orders" "$am$(grep -E 'FAIL|cuda-emu' <<<"$a1" | head -3)"; mark "attention in three block orders"
}
