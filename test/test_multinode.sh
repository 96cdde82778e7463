#!/usr/bin/env bash
# test_multinode.sh: scripts/sbatch_cpu.sh on a two-node Slurm cluster (test/cluster.sh: two simulated nodes
# in network namespaces on a bridge, each with its own slurmd and hostname; MPI between them over TCP). As
# root: `bash test/test_multinode.sh` or `make test-multinode`. It checks:
#   (a) one rank on each node at ZeRO-1, 2 and 3, and --pp 2 with one stage on each node: the job completes;
#       every step's loss and gradient norm in the JSON log equal those of the same 2 ranks under mpirun on
#       one machine bit for bit, and the final checkpoint, written by ranks on both nodes into one file, is
#       byte-identical to theirs; and they match a single process reading the same tokens (accumulation 2)
#       as the one-node tests require (1e-5 relative: 2 ranks sum the micro-batches' gradients in another
#       order than one process accumulating them, so the last bits differ from the 8th step on);
#   (b) placement: the banner names the node of every rank, and with 2 stages x 2 data-parallel ranks on 2
#       nodes each stage's data-parallel group is on one node and both pipeline hops cross nodes; a 3D layout
#       passed through EXTRA_ARGS (--tp 2 x --pp 2) keeps each TP group in a node;
#   (c) preemption: `scancel --signal=USR1` on a running 2-node job: checkpoint, exit 0; the same job
#       resubmitted resumes from it; losses and norms of the two together equal an uninterrupted run's of
#       the same 2 ranks bit for bit, and so does the final model file;
#   (d) an out dir only one node sees (a node-local directory): the run stops with the message naming the
#       rank and node that cannot see rank 0's files, and writes no checkpoint;
#   (g) scripts/sbatch_gpu.sh with the emulated CUDA build (./train_gpt_emu, built by make test when the CUDA
#       toolkit's headers are there) as the binary, one rank on each node, ZeRO-1, --comm nccl (the emulator's
#       NCCL carried over MPI): losses and norms bit-identical to the same 2 ranks under mpirun on one machine,
#       and within 1e-5 of one emulated process;
#   (h) a rank that crashes (TRAIN_GPT_FAULT=signal:SEGV on node2): the job fails and the suite keeps the core
#       and prints every thread's stack with the trainer's function names, as it does for any job or reference
#       run that dies (a core in the rank's working directory, the repo root; else Open MPI's frames named by
#       addr2line);
#   (i) MPI_Init is a barrier across the nodes: with rank 1 held 1 s in each of MPI_Init's waits (an LD_PRELOAD
#       stretches Open MPI's usleep(100)), rank 0 leaves MPI_Init no sooner (test/cluster.sh's PMIxCollFence=ring;
#       by Slurm's tree the end-of-MPI_Init fence returned at once on each node, and a rank's first message could
#       reach a peer still in the modex fence: a NULL call in its TCP BTL, the jobs' rare segfault in PMPI_Init);
#   (e) teardown: no process of the cluster left, its directory removed;
#   (f) a node lost mid-run (its link cut, then its slurmd and every process on it killed): within the
#       watchdog's time (--comm-timeout 5) rank 0 on node1 says it waits in a collective and exits, Slurm
#       reports the node failure of node2 (the banner put rank 1 there) and requeues the job (--requeue);
#       once node2 is back (a replacement under the same name) the requeued job resumes from the last
#       checkpoint and ends with all 120 losses, norms and final files of an uninterrupted run.
# Skips, with the reason, where the machine cannot make namespaces (not root, no CAP_NET_ADMIN, no bridge).
source "$(dirname "$0")/lib.sh"
source test/cluster.sh
T_START=$SECONDS
# a rank that dies of a signal dumps core: sbatch passes this limit on to the job (and mpirun to its ranks)
ulimit -c unlimited 2>/dev/null || ulimit -c "$(ulimit -Hc)"
touch "$W/.start"
trap 'cluster_down; rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
done_() {
  if [ -n "$CLUSTER_DIR" ]; then
    cluster_down
    if [ -z "${CLUSTER_LEFT// /}" ] && [ ! -e "$CLUSTER_DIR" ]; then
      ok "(e) teardown: every process in the cluster's namespaces ended, $CLUSTER_DIR removed (${CLUSTER_DOWN_S} s)"
    else bad "(e) teardown" "left: ${CLUSTER_LEFT:-none}; dir: $([ -e "$CLUSTER_DIR" ] && echo still there || echo removed)"; fi
  fi
  echo "test_multinode.sh took $((SECONDS - T_START)) s"
  finish; exit
}

have_mpi "two-node Slurm cluster" || done_
cluster_up 2; rc=$?
if [ $rc -eq 2 ]; then skip "two-node Slurm cluster: $CLUSTER_SKIP"; done_; fi
if [ $rc -ne 0 ]; then bad "two-node cluster comes up" "$SLURM_ERR"; done_; fi
ok "cluster up in $CLUSTER_UP_S s: ${CLUSTER_NODES[*]} idle, $(slurm_versions), slurmctld on ctl ($CLUSTER_NET.1)"

# submit NAME OUT_DIR STEPS ZERO_STAGE EXTRA_ARGS [SBATCH_ARGS...]: prints the job id
submit() {
  local name=$1 out=$2 steps=$3 z=$4 extra=$5; shift 5
  login ${JOB_ENV:-} OUT_DIR="$out" STEPS="$steps" MODEL=d2 MICRO_BATCH=4 SEQ_LEN=32 ZERO_STAGE="$z" CHECKPOINT_EVERY="${CKPT:-100}" \
    EXTRA_ARGS="-v 0 -s 0 $extra" timeout 60 sbatch --parsable --time=5 --output="$W/$name-%j.out" "$@" scripts/sbatch_cpu.sh \
    2>"$W/$name.sbatch.err" | cut -d';' -f1
}
# crash_report TEXT: where a rank died of a signal, its stack by name. The kernel writes the core to the rank's
# working directory (the repo root; core_pattern "core" or "core.PID"): each new one is moved to CORE_DIR, kept,
# and gdb prints every thread's stack with the binary's symbols. Without a core or gdb, addr2line names the
# trainer's frames that Open MPI's signal handler printed in TEXT ("./train_gpt_cpu(+0x1c2d3)").
CORE_DIR=${CORE_DIR:-${TMPDIR:-/tmp}/test_multinode_cores}
crash_report() {
  local c dst bin fr off kept=""
  for c in core core.[0-9]*; do
    [ -f "$c" ] && [ "$c" -nt "$W/.start" ] || continue
    mkdir -p "$CORE_DIR" && dst=$(mktemp "$CORE_DIR/core.XXXXXX") && mv "$c" "$dst" || continue
    kept=1
    bin=$(gdb -batch -c "$dst" 2>/dev/null | sed -n "s/^Core was generated by \`\([^ ']*\).*/\1/p")
    echo "core of ${bin:-?} kept: $dst"
    command -v gdb >/dev/null && [ -n "$bin" ] && gdb -batch -ex "thread apply all bt 24" "$bin" "$dst" 2>/dev/null | grep -E '^(Thread |#)'
  done
  [ -n "$kept" ] && command -v gdb >/dev/null && return
  grep -oE '[^ ]*train_gpt_[a-z]+\(\+0x[0-9a-f]+\)' <<<"$1" | while read -r fr; do
    off=${fr#*(+}; echo "$fr: $(addr2line -f -e "${fr%%(*}" "${off%)}" 2>/dev/null | head -1)"
  done
}
job_info() {  # what to print when a job went wrong: its state, output and any crash's stack
  local out; out=$(cat "$W/$1".sbatch.err "$W/$1"-*.out 2>/dev/null)
  echo "state ${JOB_STATE:-?} exit ${JOB_EXIT:-?}"
  tail -n 30 <<<"$out"
  crash_report "$out"
}
# badj NAME DETAIL: bad, with room for a stack
badj() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | tail -n 80 | sed 's/^/    /'; fail=$((fail+1)); }
cat > "$W/check.py" <<'PYEOF'
import json, sys
def steps(path):  # step -> (loss, norm), the first time each step is logged
    out = {}
    for line in open(path):
        d = json.loads(line)
        if "loss" in d: out.setdefault(d["step"], (d["loss"], d["norm"]))
    return out
mode, ref, got = sys.argv[1], steps(sys.argv[2]), steps(sys.argv[3])
if sorted(got) != sorted(ref): sys.exit(f"steps differ: {len(got)} logged, reference {len(ref)}")
if mode == "exact":
    diff = [s for s in sorted(ref) if ref[s] != got[s]]
    if diff: sys.exit(f"{len(diff)} steps differ, first {diff[0]}: loss, norm {got[diff[0]]} vs {ref[diff[0]]}")
    print(f"all {len(ref)} losses and norms bit-identical")
else:
    err = max(abs(a - b) / abs(a) for s in ref for a, b in zip(ref[s], got[s]))
    if err > 1e-5: sys.exit(f"losses and norms differ by up to {err:.1e} relative")
    print(f"{len(ref)} losses and norms within {err:.1e} relative")
PYEOF

# references on this machine: one process with accumulation 2 reads what 2 ranks read; the same 2 ranks
# under mpirun, with the job's flags
# (c) and (f): a job stopped at step 10 or 30 (a signal, a lost node) and resumed, against an uninterrupted run of
# LONG steps. It only has to outlast the stop, which lands within a few steps of it (the test polls the log every
# 0.1 s), so 120 steps leave 90 of margin; 300 cost 3 runs of 2 ranks 180 steps more each.
LONG=120
ref() {  # ref NAME STEPS NP [FLAGS...]
  local name=$1 steps=$2 np=$3; shift 3
  local run=($BIN); [ "$np" -gt 1 ] && run=("${MPI[@]}" --bind-to none -np "$np" $BIN)
  "${run[@]}" -e d2 -b 4 -t 32 -x "$steps" -v 0 -s 0 -n 100 "$@" -o "$W/$name" --log "$W/$name.jsonl" > "$W/$name.out" 2>&1 ||
    badj "reference run $name" "$(tail -n 5 "$W/$name.out"; crash_report "$(cat "$W/$name.out")")"
}
ref one20 20 1 --grad-accum 2

# (a) + (b): four jobs at once (two fit side by side on the two nodes' CPUs)
declare -A JOB=()
for z in 1 2 3; do JOB[z$z]=$(submit "z$z" "$W/z$z" 20 "$z" "" --nodes=2 --ntasks-per-node=1); done
JOB[pp]=$(submit pp "$W/pp" 20 1 "--pp 2 --grad-accum 2" --nodes=2 --ntasks-per-node=1)
EMU_FLAGS="--precision fp32 -e d2 -b 2 -t 80 -x 6 -v 0 -s 0 -z 1"
if [ -x ./train_gpt_emu ]; then
  JOB[gpu]=$(login OUT_DIR="$W/gpu" RECIPE=none TRAIN_BIN=./train_gpt_emu EXTRA_ARGS="$EMU_FLAGS --comm nccl" timeout 60 sbatch --parsable \
    --time=5 --nodes=2 --ntasks-per-node=1 --gpus-per-node=0 --cpus-per-task=1 --output="$W/gpu-%j.out" scripts/sbatch_gpu.sh 2> "$W/gpu.sbatch.err")
fi
JOB[place]=$(submit place "$W/place" 20 1 "--pp 2 --dry-run" --nodes=2 --ntasks=4)
JOB[segv]=$(JOB_ENV=TRAIN_GPT_FAULT=signal:SEGV:2:1 submit segv "$W/segv" 5 1 "" --nodes=2 --ntasks-per-node=1)
JOB[place3d]=$(submit place3d "$W/place3d" 20 1 "--tp 2 --pp 2 --dry-run" --nodes=2 --ntasks=4)
# the references for the same layouts, and for (c), while the jobs run
for z in 1 2 3; do ref "mpi_z$z" 20 2 -z "$z"; done
ref mpi_pp 20 2 -z 1 --pp 2 --grad-accum 2
ref mpi_long $LONG 2 -z 1
if [ -x ./train_gpt_emu ]; then
  # shellcheck disable=SC2086
  "${MPI[@]}" --bind-to none -np 2 ./train_gpt_emu $EMU_FLAGS --comm nccl --log "$W/mpi_gpu.jsonl" > "$W/mpi_gpu.out" 2>&1 || bad "mpirun reference of the emulated build" "$(tail -n 5 "$W/mpi_gpu.out")"
  # shellcheck disable=SC2086
  ./train_gpt_emu $EMU_FLAGS --grad-accum 2 --log "$W/one_gpu.jsonl" > "$W/one_gpu.out" 2>&1 || bad "one-process reference of the emulated build" "$(tail -n 5 "$W/one_gpu.out")"
fi
for k in z1 z2 z3 pp place place3d; do
  id=${JOB[$k]}
  case $k in z*) name="ZeRO-${k#z}, one rank on each node" ;; pp) name="--pp 2, one stage on each node" ;; place) name="--pp 2 x 2 ranks on 2 nodes (--dry-run)" ;;
    place3d) name="--tp 2 x --pp 2 on 2 nodes (--dry-run)" ;; esac
  if [ -z "$id" ] || ! wait_job "$id" 120 || [ "$JOB_STATE" != COMPLETED ] || [ "$JOB_EXIT" != 0:0 ]; then
    badj "(a) job $k ($name) completes" "$(job_info "$k")"; continue
  fi
  out=$(cat "$W/$k-$id.out")
  if [ "$k" = place ]; then
    want="placement: 4 ranks on 2 nodes | node1: rank 0 (stage 0, dp 0), rank 1 (stage 0, dp 1) | node2: rank 2 (stage 1, dp 0), rank 3 (stage 1, dp 1)"
    want2="placement: data-parallel groups spanning nodes: 0 of 2 | pipeline hops between nodes: 2 of 2"
    grep -qxF "$want" <<<"$out" && grep -qxF "$want2" <<<"$out" \
      && ok "(b) job $id, $name: '${want#placement: }'; '${want2#placement: }'" || bad "(b) placement of 2 stages x 2 ranks" "$(grep placement <<<"$out")"
    continue
  fi
  if [ "$k" = place3d ]; then
    want="placement: 4 ranks on 2 nodes | node1: rank 0 (stage 0, dp 0, tp 0), rank 1 (stage 0, dp 0, tp 1) | node2: rank 2 (stage 1, dp 0, tp 0), rank 3 (stage 1, dp 0, tp 1)"
    want2="placement: data-parallel groups spanning nodes: 0 of 4 | pipeline hops between nodes: 2 of 2 | tensor-parallel groups spanning nodes: 0 of 2 (keep them in a node)"
    grep -qxF "$want" <<<"$out" && grep -qxF "$want2" <<<"$out" && grep -qF "world 4 = tensor-parallel 2" <<<"$out" \
      && ok "(b) job $id, $name: '${want#placement: }'; '${want2#placement: }'" || bad "(b) placement of --tp 2 x --pp 2" "$(grep -E 'placement|world' <<<"$out")"
    continue
  fi
  if [ "$k" = pp ]; then want="placement: 2 ranks on 2 nodes | node1: rank 0 (stage 0, dp 0) | node2: rank 1 (stage 1, dp 0)"
  else want="placement: 2 ranks on 2 nodes | node1: rank 0 (stage 0, dp 0) | node2: rank 1 (stage 0, dp 1)"; fi
  grep -qxF "$want" <<<"$out" && ok "(b) job $id, $name: the banner says '${want#placement: }'" || bad "(b) $name: placement banner" "$(grep placement <<<"$out")"
  m=mpi_$k
  r=$($PY "$W/check.py" exact "$W/$m.jsonl" "$W/$k/log.jsonl" 2>&1) && ok "(a) job $id, $name: vs the same 2 ranks under mpirun on one machine: $r" \
    || bad "(a) $name vs mpirun on one machine" "$r"
  cmp -s "$W/$m/model_00000020.bin" "$W/$k/model_00000020.bin" && cmp -s "$W/$m/state_00000020.bin" "$W/$k/state_00000020.bin" \
    && ok "(a) job $id, $name: the checkpoint written from both nodes is whole: model and state files byte-identical to mpirun's" \
    || bad "(a) $name: final checkpoint" "$(ls -l "$W/$k" 2>&1)"
  r=$($PY "$W/check.py" close "$W/one20.jsonl" "$W/$k/log.jsonl" 2>&1) && ok "(a) job $id, $name: vs one process x 2 micro-batches: $r" \
    || bad "(a) $name vs one process" "$r"
done

# (g) sbatch_gpu.sh with the emulated CUDA build
if [ -z "${JOB[gpu]:-}" ] && [ ! -x ./train_gpt_emu ]; then
  skip "(g) sbatch_gpu.sh on 2 nodes: no ./train_gpt_emu (make train_gpt_emu; it needs the CUDA toolkit's headers in ${CUDA_HOME:-/usr/local/cuda}/include)"
elif id=${JOB[gpu]:-}; [ -z "$id" ] || ! wait_job "$id" 120 || [ "$JOB_STATE" != COMPLETED ] || [ "$JOB_EXIT" != 0:0 ]; then
  badj "(g) sbatch_gpu.sh with ./train_gpt_emu on 2 nodes completes" "$(job_info gpu)"
else
  out=$(cat "$W/gpu-$id.out")
  grep -qxF "placement: 2 ranks on 2 nodes | node1: rank 0 (stage 0, dp 0) | node2: rank 1 (stage 0, dp 1)" <<<"$out" \
    && ok "(g) job $id: sbatch_gpu.sh, ./train_gpt_emu --comm nccl, one rank on each node: $(grep -o '^train_gpt ([a-z ]*build) on [^|(]*' <<<"$out" | head -1 | sed "s/ *$//")" \
    || bad "(g) sbatch_gpu.sh placement" "$(grep -E 'placement|train_gpt' <<<"$out")"
  r=$($PY "$W/check.py" exact "$W/mpi_gpu.jsonl" "$W/gpu/log.jsonl" 2>&1) && ok "(g) job $id vs the same 2 emulated ranks under mpirun on one machine: $r" \
    || bad "(g) sbatch_gpu.sh vs mpirun on one machine" "$r"
  r=$($PY "$W/check.py" close "$W/one_gpu.jsonl" "$W/gpu/log.jsonl" 2>&1) && ok "(g) job $id vs one emulated process x 2 micro-batches: $r" \
    || bad "(g) sbatch_gpu.sh vs one process" "$r"
fi

# (h) the crash of rank 1 on node2 at step 2: the job fails, and its core and stack are there to read
if id=${JOB[segv]:-}; [ -n "$id" ] && wait_job "$id" 120 && [ "$JOB_STATE" = FAILED ]; then
  # the whole output for the two messages: rank 0's banner is flushed with its first step line, after rank 1's
  # message may have landed, so job_info's last 30 lines can miss it; the stack comes from job_info
  rep=$(job_info segv); all=$(cat "$W"/segv.sbatch.err "$W"/segv-*.out 2>/dev/null)
  if grep -q "fault injection: rank 1 raises SIGSEGV at step 2" <<<"$all" && grep -q "Signal: Segmentation fault" <<<"$all" \
     && grep -qE "(^#[0-9]+ .* in |: )train_main" <<<"$rep" && grep -qE "(^#[0-9]+ .* in |: )(fault_step_begin|raise|__pthread_kill)" <<<"$rep"; then
    ok "(h) rank 1 crashed on node2 (job $id $JOB_STATE): $(grep -m1 -o '^core of .*' <<<"$rep" || echo 'no core; Open MPI frames named by addr2line'), the trainer's frames: $(grep -oE ' in [A-Za-z_][A-Za-z0-9_.]* \(\)$|train_gpt_[a-z]+\(\+0x[0-9a-f]+\): [A-Za-z_][A-Za-z0-9_.]*' <<<"$rep" | sed -E 's/^ in //; s/ \(\)$//; s/^.*: //' | awk '!s[$0]++' | paste -sd' ')"
  else badj "(h) a crashed rank's core and stack are reported" "$rep"; fi
else badj "(h) the job with a rank crashing at step 2 fails" "$(job_info segv)"; fi

# (i) MPI_Init is a barrier across the nodes: rank 1 is held NAP s in each of Open MPI's waits in MPI_Init (its
# loops of opal_progress and usleep(100)); rank 0 may leave MPI_Init only after rank 1 has reached the last fence,
# so not before rank 1's first nap (in the modex fence) has ended. Times are the machine's one clock, so a rank
# started late by a loaded machine changes nothing. A fence that does not wait lets rank 0 leave within the nap
# (-NAP to 0 s after its end), so the nap's length only sets that window: 1 s (2 s made the three runs 7 s longer).
NAP=1
cat > "$W/init.c" <<'CEOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
    /* rank 0 comes 0.5 s late, so that rank 1 waits (naps) in the modex fence: reaching it after rank 0's data,
       rank 1 could find it complete and nap first in the last fence, which rank 0 then rightly leaves as that nap
       starts (-NAP: a busy machine's false failure) */
    const char *r = getenv("SLURM_PROCID");
    if (r && atoi(r) == 0) { struct timespec d = {0, 500000000}; nanosleep(&d, NULL); }
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d left MPI_Init at %.3f\n", rank, now());
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
CEOF
cat > "$W/slow.c" <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int usleep(useconds_t us) {  /* in the rank SLOW_RANK, Open MPI's 100 us naps in MPI_Init's waits last NAP_US */
    static int (*real)(useconds_t);
    static int slow = -1;
    if (!real) real = (int (*)(useconds_t))dlsym(RTLD_NEXT, "usleep");
    if (slow < 0) { const char *r = getenv("SLURM_PROCID"), *s = getenv("SLOW_RANK"); slow = r && s && atoi(r) == atoi(s); }
    if (!slow || us != 100) return real(us);
    struct timespec t; clock_gettime(CLOCK_REALTIME, &t);
    printf("nap at %.3f\n", t.tv_sec + 1e-9 * t.tv_nsec); fflush(stdout);
    return real(NAP_US);
}
CEOF
if mpicc -O2 "$W/init.c" -o "$W/init" 2> "$W/init.err" && ${CC:-cc} -O2 -shared -fPIC -DNAP_US=$((NAP * 1000000)) "$W/slow.c" -o "$W/slow.so" -ldl 2>> "$W/init.err"; then
  ts=""; early=0
  for _ in 1 2 3; do
    # rank 0's exit minus the end of rank 1's first nap: negative when rank 0 left before rank 1 could reach the last fence
    t=$(login SLOW_RANK=1 LD_PRELOAD="$W/slow.so" timeout 60 srun --mpi=pmix --nodes=2 --ntasks=2 --ntasks-per-node=1 "$W/init" 2>&1 |
        awk '/^nap at / && !n { n = $3 } /^rank 0 left MPI_Init at / { e = $6 } END { if (n && e) printf "%+.2f", e - (n + nap) }' nap="$NAP")
    ts="$ts ${t:-?}"
    awk -v t="${t:--9}" 'BEGIN { exit !(t < 0) }' && early=$((early + 1))
  done
  [ "$early" -eq 0 ] && ok "(i) MPI_Init is a barrier across nodes: rank 1 held $NAP s in each of its waits, rank 0 left MPI_Init$ts s after rank 1's first nap ended" \
    || bad "(i) MPI_Init is a barrier across nodes: rank 0 left it$ts s after rank 1's first nap (of $NAP s, in the modex fence) ended: before rank 1 reached its last fence (Slurm's tree fence: test/cluster.sh's mpi.conf)"
else bad "(i) MPI_Init barrier: cannot build its probe" "$(cat "$W/init.err")"; fi

# (c) preemption of a 2-node job, resubmission, bit-exact continuation
id=$(submit pre "$W/pre" $LONG 1 "" --nodes=2 --ntasks-per-node=1)
stopped=""
n=$(wait_steps "$id" "$W/pre/log.jsonl" 10)
if [ "${n:-0}" -ge 10 ] && sl scancel --signal=USR1 "$id"; then
  wait_job "$id" 60
  N=$(grep -o 'stop signal: checkpointed after step [0-9]*' "$W/pre-$id.out" 2>/dev/null | grep -o '[0-9]*$' | tail -1)
  if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ -n "$N" ] && [ "$N" -lt $LONG ] && [ -f "$W/pre/state_$(printf %08d "$N").bin" ]; then
    ok "(c) 2-node job $id got SIGUSR1 at step $n: 'stop signal: checkpointed after step $N', COMPLETED, exit 0:0, checkpoint of step $N"
    stopped=1
  else badj "(c) job $id checkpoints and exits 0 on SIGUSR1 (sent at step $n, stopped after ${N:-?})" "$(job_info pre)"; fi
else
  [ -n "$id" ] && wait_job "$id" 1
  badj "(c) job ${id:-?} reaches step 10 and takes scancel --signal=USR1 (at step ${n:-0})" "$(job_info pre)"
fi
if [ -n "$stopped" ]; then
  id2=$(submit pre "$W/pre" $LONG 1 "" --nodes=2 --ntasks-per-node=1)
  if [ -n "$id2" ] && wait_job "$id2" 120 && [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && grep -q "resume: step $N from" "$W/pre-$id2.out"; then
    ok "(c) resubmitted 2-node job $id2 resumed from step $N and completed"
    r=$($PY "$W/check.py" exact "$W/mpi_long.jsonl" "$W/pre/log.jsonl" 2>&1) \
      && ok "(c) preempted + resumed on 2 nodes vs 2 ranks uninterrupted: $r (steps 1-$N from job $id, $((N + 1))-$LONG from job $id2)" \
      || bad "(c) preempted + resumed vs uninterrupted" "$r"
    last=$(printf %08d $LONG)
    cmp -s "$W/mpi_long/model_$last.bin" "$W/pre/model_$last.bin" && cmp -s "$W/mpi_long/state_$last.bin" "$W/pre/state_$last.bin" \
      && ok "(c) final model_$last.bin and state_$last.bin byte-identical to the uninterrupted run's" \
      || bad "(c) final checkpoint vs the uninterrupted run's" "$(ls -l "$W/pre" "$W/mpi_long" 2>&1)"
  else badj "(c) resubmitted job resumes from step $N and completes" "$(job_info pre)"; fi
fi

# (f) a node lost mid-run; the requeued job resumes on the replaced node
id=$(CKPT=25 submit lost "$W/lost" $LONG 1 "--comm-timeout 5" --nodes=2 --ntasks-per-node=1 --requeue)
end=$((SECONDS + 60)); n=0
while [ -n "$id" ] && [ $SECONDS -lt $end ]; do
  n=$(steps_in "$W/lost/log.jsonl"); [ "${n:-0}" -ge 30 ] && break   # past the checkpoint of step 25
  sleep 0.1
done
if [ "${n:-0}" -ge 30 ]; then
  t0=$SECONDS
  node_kill node2
  end=$((SECONDS + 60)); st=""; exited=""
  while [ $SECONDS -lt $end ]; do
    [ -z "$exited" ] && grep -q "srun: error: node1: task 0: Exited with exit code 3" "$W"/lost-"$id".out 2>/dev/null && exited=$((SECONDS - t0))
    st=$(sl scontrol show job -o "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    [ -n "$exited" ] && case "$st" in RUNNING|COMPLETING|"") ;; *) break ;; esac
    sleep 0.25
  done
  out=$(cat "$W"/lost-"$id".out)
  restarts=$(sl scontrol show job -o "$id" 2>/dev/null | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
  if [ -n "$exited" ] && [ "$exited" -le 12 ] && grep -q "watchdog: rank 0 has waited 5 s inside collective .* on node1" <<<"$out" &&
     grep -qE "srun: error: Node failure on node2|sbatch_cpu.sh: a rank's peer was lost \(the watchdog's exit 3 after step [0-9]+\): requeueing job $id" <<<"$out" && grep -q "node2: rank 1 (stage 0, dp 1)" <<<"$out" && [ "${restarts:-0}" -ge 1 ]; then
    ok "(f) node2 lost at step $n: rank 0's watchdog ends the step $exited s later ('$(grep -o 'watchdog: rank 0 has waited 5 s inside collective #[0-9]*' <<<"$out") ... on node1'), $(grep -qF "Node failure on node2" <<<"$out" && echo "Slurm says 'Node failure on node2'" || echo "sbatch_cpu.sh requeued it before Slurm marked node2 down") (rank 1's node in the banner), job $id $st, restarts $restarts"
    # the replacement comes once Slurm has marked node2 down (SlurmdTimeout): revived before that, its new slurmd
    # registered while slurmctld still counted the old one's missed answers, which then failed the requeued job
    for _ in $(seq 160); do case "$(sl sinfo -h -n node2 -o %T 2>/dev/null)" in *down*|*fail*) break ;; esac; sleep 0.25; done
    node_revive node2
    # a requeued job waits for its begin time; start it as soon as the replacement node is up
    for _ in $(seq 80); do [ "$(sl sinfo -h -n node2 -o %T 2>/dev/null)" = idle ] && break; sleep 0.25; done
    # and a moment more: started while node2 still finishes the killed run, the job's record counted one
    # node (srun: "SLURM_JOB_NUM_NODES environment variable conflicts with allocated node count (2 != 1)")
    sleep 3
    sl scontrol update JobId="$id" StartTime=now > /dev/null 2>&1
    if wait_job "$id" 120 && [ "$JOB_STATE" = COMPLETED ] && grep -q "resume: step 25 from" "$W"/lost-"$id".out; then
      r=$($PY "$W/check.py" exact "$W/mpi_long.jsonl" "$W/lost/log.jsonl" 2>&1) && cmp -s "$W/mpi_long/model_$(printf %08d $LONG).bin" "$W/lost/model_$(printf %08d $LONG).bin" \
        && ok "(f) the requeued job $id resumed from step 25 on node1 + node2 and completed: $r vs an uninterrupted run, final model byte-identical" \
        || badj "(f) the requeued job's losses and final model vs an uninterrupted run" "$r; $(job_info lost)"
    else badj "(f) the requeued job resumes from step 25 and completes" "$(job_info lost)"; fi
  else badj "(f) node2 lost: the job ends within the watchdog's time, naming node and rank, and is requeued (ended after ${exited:-?} s, restarts ${restarts:-?})" "$(job_info lost)"; fi
else badj "(f) the job to lose a node reaches step 30" "$(job_info lost)"; fi

# (d) an out dir each node has its own copy of: the run stops before writing anything, naming who cannot see it
id=$(submit local "$CLUSTER_DIR/local/out" 20 1 "" --nodes=2 --ntasks-per-node=1)
if [ -n "$id" ] && wait_job "$id" 60; then
  out=$(cat "$W/local-$id.out")
  written=$(ls "$CLUSTER_DIR/nodes/node1/local/out" "$CLUSTER_DIR/nodes/node2/local/out" 2>/dev/null | grep -c '\.bin')
  if [ "$JOB_STATE" = FAILED ] && grep -q "error: -o/--out-dir $CLUSTER_DIR/local/out: rank 1 on node2 cannot see the file rank 0 on node1 wrote there" <<<"$out" \
     && [ "$written" -eq 0 ] && ! grep -q '"loss"' "$CLUSTER_DIR/nodes/node1/local/out/log.jsonl" 2>/dev/null; then
    ok "(d) an out dir on node-local disks: job $id $JOB_STATE ($JOB_EXIT): '$(grep -o 'rank 1 on node2 cannot see[^;]*' <<<"$out")'; no checkpoint, no step"
  else badj "(d) an out dir only node1 sees stops the run" "$(job_info local) (files: $written)"; fi
else badj "(d) job with a node-local out dir ends" "$(job_info local)"; fi

done_
