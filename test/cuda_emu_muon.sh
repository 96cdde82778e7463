# test/cuda_emu_muon.sh: test_cuda_emu.sh's Muon section (`bash test/test_cuda_emu.sh muon` runs it alone), sourced
# by it: --optimizer muon in the CUDA build (cuda/muon.cuh) on the emulator beside the CPU build's Muon, which
# test_muon.sh holds to its numpy reference. Newton-Schulz through cuBLASLt in the run's precision, the momentum and
# the step as kernels, the host's fp32 code under --offload. Bounds are stated beside what the emulator measured.
muon_runs() {
  local r out M=(--optimizer muon)
  # the kernels alone: momentum and step against cpu/muon_host.h's, Newton-Schulz tall, wide and square in fp32,
  # bf16 and fp16 against the fp32 reference (dev/cuda/kernels_update.cuh's check_muon)
  out=$(./dev/cuda/kernels_emu check muon 2>&1) && ok "Muon's kernels vs the CPU build's: $(summary "$out")" \
    || bad "Muon's kernels vs the CPU build's" "$(grep -E 'FAIL|cuda-emu|error' <<<"$out")"
  # fp32, 4 steps beside the CPU build (steps 2-4: three of Muon's updates, the momentum carried): GPT-2 d2 (fc tall,
  # fcproj wide, q/k/v apart) and llama-d2 (GQA 2:1, up and gate tall and apart); measured over 8 steps losses 5.8e-8
  # and 5.4e-8, norms 0 and 5.9e-8 (d2, llama-d2): bound 1e-5. bf16: the model in bf16 and Newton-Schulz in bf16
  # (torch's), against the CPU build's fp32 Muon; measured over 8 steps losses 6.6e-5 and 1.1e-4, norms 6.2e-4 and
  # 6.4e-4: bounds 1e-3 and 4e-3
  local lb=(-e llama-d2 -b 2 -t 32 -x 4 -v 0 -s 0 "${M[@]}") m p
  for m in d2:48 llama-d2:32; do
    local a=(-e ${m%:*} -b 2 -t ${m#*:} -x 4 -v 0 -s 0 --grad-accum 2 "${M[@]}") n=${m%:*}
    ./train_gpt_cpu "${a[@]}" --log "$W/mu-$n-cpu.jsonl" > "$W/mu-$n-cpu.out" 2>&1 || bad "Muon CPU run ($n)" "$(tail -3 "$W/mu-$n-cpu.out")"
    for p in fp32:1e-5:1e-5 bf16:1e-3:4e-3; do
      local pr=${p%%:*} tl=${p#*:}
      $EMU --precision $pr "${a[@]}" --log "$W/mu-$n-$pr.jsonl" > "$W/mu-$n-$pr.out" 2>&1 || bad "Muon $pr run ($n)" "$(tail -3 "$W/mu-$n-$pr.out")"
      r=$(close "$W/mu-$n-cpu.jsonl" "$W/mu-$n-$pr.jsonl" ${tl%:*} ${tl#*:}) && ok "Muon $pr ($n), 4 steps vs the CPU build's fp32 Muon: $r" \
        || bad "Muon $pr ($n) vs the CPU build's" "$r"
    done
  done
  # the memory plan counts Muon's state and its Newton-Schulz workspace on the device: allocated = planned
  out=$($PY -c '
import json, sys
a = next(d["allocated"] for d in map(json.loads, open(sys.argv[1])) if "allocated" in d)
print(a["model_state_bytes"], a["planned_model_state_bytes"]); sys.exit(a["model_state_bytes"] != a["planned_model_state_bytes"])' "$W/mu-llama-d2-bf16.jsonl") \
    && ok "Muon bf16 (llama-d2): model state allocated as planned ($out bytes)" || bad "Muon's model state as planned" "$out"
  # the layouts against one process with the same tokens a step (2e-5, the issue's): ZeRO-1 and -2 through MPI
  # (staged copies), ZeRO-3 over NCCL, --pp 2, and --offload optimizer at ZeRO-2, where the host runs Muon
  # (cpu/muon_host.h) and its collectives take host memory; measured 0 to 5.9e-8
  local one=(--precision fp32 "${lb[@]}") k
  if command -v mpirun > /dev/null; then
    local lays=("-z 1:ZeRO-1 through MPI" "-z 2:ZeRO-2 through MPI" "-z 3 --comm nccl:ZeRO-3 over NCCL"
                "--pp 2 --grad-accum 2:--pp 2" "-z 2 --offload optimizer:ZeRO-2, --offload optimizer (the host runs Muon)")
    for k in "${!lays[@]}"; do
      local lay=${lays[$k]}
      # shellcheck disable=SC2086
      "${MPI[@]}" -np 2 $EMU "${one[@]}" ${lay%%:*} --log "$W/mu-lay$k.jsonl" > "$W/mu-lay$k.out" 2>&1
      r=$(close "$W/mu-llama-d2-fp32.jsonl" "$W/mu-lay$k.jsonl" 2e-5) && ok "Muon, 2 ranks, ${lay#*:} vs 1 process: $r" \
        || bad "Muon, 2 ranks, ${lay#*:}" "$r $(tail -3 "$W/mu-lay$k.out")"
    done
    # --tp 2 over NCCL (cuda/muon.cuh's Newton-Schulz on each matrix gathered whole from its two slices: q, k, v, up
    # and gate by rows, wo and down by columns, a strided block copy each way) against the CPU build's --tp 2 and
    # one process; measured 0 and 0 (fp32, llama-d2, 8 steps: a copy that drops the last row shows 2.2e-5 only by step 3,
    # so these keep 8)
    local tp=(-e llama-d2 -b 2 -t 32 -x 8 -v 0 -s 0 -l 1e-3 "${M[@]}")
    ./train_gpt_cpu "${tp[@]}" --log "$W/mu-tp-one.jsonl" > "$W/mu-tp-one.out" 2>&1
    "${MPI[@]}" -np 2 ./train_gpt_cpu "${tp[@]}" --tp 2 --sp 0 --log "$W/mu-tp-cpu.jsonl" > "$W/mu-tp-cpu.out" 2>&1
    "${MPI[@]}" -np 2 $EMU --precision fp32 "${tp[@]}" --tp 2 --sp 0 --comm nccl --log "$W/mu-tp.jsonl" > "$W/mu-tp.out" 2>&1
    local r2 rc=0
    r=$(close "$W/mu-tp-cpu.jsonl" "$W/mu-tp.jsonl" 2e-5) || rc=1
    r2=$(close "$W/mu-tp-one.jsonl" "$W/mu-tp.jsonl" 2e-5) || rc=1
    [ $rc = 0 ] && ok "Muon --tp 2 over NCCL (llama-d2 fp32) vs the CPU build's --tp 2: $r; vs one CPU process: $r2" \
      || bad "Muon --tp 2 over NCCL vs the CPU build's --tp 2 and one process" "$r; $r2 $(tail -3 "$W/mu-tp.out")"
  else bad "mpirun is not on the PATH: no Muon layouts (install openmpi-bin)"; fi
  # resume: killed at the start of step 3 (TRAIN_GPT_FAULT) after step 2's checkpoint, then resumed, is the
  # uninterrupted 4 steps bit for bit (the momentum in the state file, the bf16 working copies remade)
  local rs=(--precision bf16 -e llama-d2 -b 2 -t 16 -x 4 -v 0 -s 0 -n 2 "${M[@]}")
  $EMU "${rs[@]}" -o "$W/mu-full" > "$W/mu-full.out" 2>&1
  (TRAIN_GPT_FAULT=die:0:3 $EMU "${rs[@]}" -o "$W/mu-part" > /dev/null; true) 2> /dev/null  # (the shell's "Killed" too)
  [ -f "$W/mu-part/state_00000002.bin" ] && [ ! -f "$W/mu-part/state_00000004.bin" ] && $EMU "${rs[@]}" -o "$W/mu-part" -y 1 > "$W/mu-part.out" 2>&1
  cmp -s "$W/mu-full/model_00000004.bin" "$W/mu-part/model_00000004.bin" && cmp -s "$W/mu-full/state_00000004.bin" "$W/mu-part/state_00000004.bin" \
    && ok "Muon bf16 killed after step 2's checkpoint and resumed: step 4's model and state files bit-identical to the uninterrupted run's" \
    || bad "Muon bf16 resumed equals the uninterrupted run" "$(tail -3 "$W/mu-part.out")"
}
