#!/usr/bin/env bash
# test_slurm.sh: scripts/sbatch_cpu.sh on a real single-node Slurm cluster that this test brings up and
# tears down. Run from the repo root, as root, on a Debian 12 machine without systemd (CI):
#   bash test/test_slurm.sh
# It needs slurm-wlm, munge and libpmix-dev (Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so
# that only the -dev package has) and installs nothing: without them it is a SKIP that says how to get them
# (`make test-cluster`, which .ci/run runs). It starts munged, slurmctld and slurmd on a private config,
# socket, ports and directories under one temp dir, and then checks:
#   (a) a 2-rank ZeRO-1 job of 20 steps runs to completion: exit 0, 20 finite losses in the JSON log,
#       both ranks in one MPI world, a complete checkpoint at step 20;
#   (b) preemption: a job that gets `scancel --signal=USR1` mid-run checkpoints and exits 0; the same
#       script resubmitted resumes from that checkpoint and finishes; the losses of the two jobs together
#       equal an uninterrupted job's bit for bit, and so do the final model and optimizer state files;
#   (c) teardown: jobs cancelled, the three daemons stopped, no process of ours left, temp dir removed.
# Every wait is bounded. Prints PASS/FAIL lines and ends with "N passed, M failed"; exit 1 on failure.
# Slurm that is installed but cannot be started is a FAIL, not a skip.
set -u
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-python3}
# length of the reference / preempted run: the stop signal is sent at step 20 and lands within a few steps, so 60
# leave 40 of margin (150 took most of the suite's time); the jobs sample at step 40 (-s 40, after the stop), so the
# resumed job's samples draw on the restored random state, as they did at the default -s 100 of 150 steps
REF_STEPS=${REF_STEPS:-60}
T_START=$SECONDS
pass=0; fail=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -15 | sed 's/^/    /'; fail=$((fail+1)); }

source test/slurm_lib.sh
W=""; CONF=""; TORN=""
slurm_clean_env
# ---------------------------------------------------------------------------------------------------
# teardown: cancel every job, stop slurmd, slurmctld and munged by their pid files, kill anything left
# that carries our SLURM_CONF (daemons, slurmstepd, srun, ranks: all of them got it in their environment),
# remove the temp dir. Idempotent; also run from the EXIT trap when the test is interrupted.
our_pids() { [ -n "$CONF" ] && pids_with_env "SLURM_CONF=$CONF"; }
teardown() {
  [ -n "$TORN" ] && return 0
  TORN=1
  local t0=$SECONDS
  [ -n "$W" ] && [ -d "$W" ] || return 0
  if [ -f "$W/slurmctld.pid" ] && alive "$(cat "$W/slurmctld.pid" 2>/dev/null)"; then
    local ids; ids=$(sl squeue -h -o %i 2>/dev/null)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      sl scancel $ids 2>/dev/null
      for _ in $(seq 60); do [ -z "$(sl squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
    fi
  fi
  stop_pidfile "$W/slurmd.pid"
  stop_pidfile "$W/slurmctld.pid"
  stop_pidfile "$W/munge/munged.pid"
  local left; left=$(our_pids)
  # shellcheck disable=SC2086
  [ -n "$left" ] && { kill -KILL $left 2>/dev/null; sleep 0.5; }
  TEARDOWN_LEFT=$(our_pids | tr '\n' ' ')
  rm -rf "$W"
  TEARDOWN_S=$((SECONDS - t0))
}
trap 'teardown' EXIT
trap 'exit 130' INT TERM

finish() {
  teardown
  if [ -n "$W" ]; then
    if [ -z "${TEARDOWN_LEFT:-}" ] && [ ! -e "$W" ]; then
      ok "teardown: jobs cancelled, slurmd, slurmctld and munged stopped, no process of ours left, $W removed (${TEARDOWN_S:-?} s)"
    else
      bad "teardown" "processes left: ${TEARDOWN_LEFT:-none}; temp dir: $( [ -e "$W" ] && echo "still there" || echo removed)"
    fi
  fi
  echo "test_slurm.sh took $((SECONDS - T_START)) s"
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit
}

# sl CMD...: a Slurm client command on our cluster, never hanging
sl() { SLURM_CONF=$CONF timeout 20 "$@"; }

# ---------------------------------------------------------------------------------------------------
# 0. what the test needs: root, the MPI build of the trainer, Slurm + munge + the PMIx plugin's library
if [ "$(id -u)" -ne 0 ]; then bad "test_slurm.sh must run as root (it installs packages and starts Slurm's daemons)"; finish; fi
if [ ! -x ./train_gpt_cpu ]; then make -s train_gpt_cpu >/dev/null 2>&1; fi
if [ ! -x ./train_gpt_cpu ] || ! ldd ./train_gpt_cpu 2>/dev/null | grep -q libmpi; then
  echo "SKIP slurm: ./train_gpt_cpu was built without MPI (apt-get install libopenmpi-dev openmpi-bin; make then rebuilds it)"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
# installing the stack is `make test-cluster`'s job (and .ci/run's), never the test's: `make test` changes nothing
missing=$(slurm_missing)
if [ -n "$missing" ]; then
  echo "SKIP slurm: not installed: $missing; $SLURM_ENABLE"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
ok "$(slurm_versions) are installed"

# ---------------------------------------------------------------------------------------------------
# 1. the cluster: munged on its own key and socket, slurmctld + slurmd on one node named after this host
W=$(mktemp -d /tmp/test_slurm.XXXXXX)
chmod 755 "$W"   # munged wants its socket's directories searchable by everyone
CONF=$W/slurm.conf
mkdir -p "$W/state" "$W/spool" "$W/log" && chmod 700 "$W/state"
H=$(hostname -s 2>/dev/null || uname -n); H=${H%%.*}
if ! munge_start "$W/munge" env SLURM_CONF="$CONF"; then bad "munged starts and round-trips a credential" "$SLURM_ERR"; finish; fi
node=$(slurm_node_line)
ncpu=$(grep -o 'CPUs=[0-9]*' <<<"$node" | cut -d= -f2)
if [ "${ncpu:-0}" -lt 2 ]; then bad "the machine has ${ncpu:-?} CPU(s); the 2-rank jobs need 2"; finish; fi

# two free ports next to each other, away from Slurm's usual 6817/6818
port_used() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=16817
while port_used $port || port_used $((port + 1)); do port=$((port + 2)); [ $port -gt 17817 ] && break; done

cat > "$CONF" <<EOF
# single-node test cluster written by test/test_slurm.sh
ClusterName=trainci
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
$(slurm_conf_common "$W/munge/munge.socket" "$W/state")
NodeName=$H NodeAddr=127.0.0.1 $node State=UNKNOWN
PartitionName=ci Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOF

SLURM_CONF=$CONF timeout 30 slurmctld -f "$CONF" > "$W/log/slurmctld.start" 2>&1
SLURM_CONF=$CONF timeout 30 slurmd -f "$CONF" > "$W/log/slurmd.start" 2>&1
state=""
for _ in $(seq 120); do   # 30 s
  state=$(sl sinfo -h -n "$H" -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  sleep 0.25
done
if [ "$state" != idle ]; then
  bad "slurmctld and slurmd start and node $H is idle (state '${state:-none}')" \
      "$(tail -n 8 "$W/log/slurmctld.start" "$W/log/slurmd.start" "$W/log/slurmctld.log" "$W/log/slurmd.log" 2>/dev/null)"
  finish
fi
ok "munged, slurmctld and slurmd are up (ports $port/$((port + 1))); node $H is idle: $node"

# ---------------------------------------------------------------------------------------------------
# helpers: submit the CPU script, wait for a job, read its state
# submit NAME OUT_DIR STEPS [SBATCH_ARGS...]: prints the job id (with --wait: once the job has ended)
submit() {
  local name=$1 out=$2 steps=$3; shift 3
  OUT_DIR=$out STEPS=$steps MODEL=d2 MICRO_BATCH=4 SEQ_LEN=32 ZERO_STAGE=1 CHECKPOINT_EVERY=100 EXTRA_ARGS="-s 40" SLURM_CONF=$CONF \
    timeout 120 sbatch --parsable --time=5 --output="$W/$name-%j.out" "$@" scripts/sbatch_cpu.sh 2>"$W/$name.sbatch.err" | cut -d';' -f1
  return "${PIPESTATUS[0]}"
}
job_info() {  # what to print when a job went wrong
  echo "state ${JOB_STATE:-?} exit ${JOB_EXIT:-?}"
  cat "$W/$1"*.sbatch.err "$W/$1"-*.out 2>/dev/null | tail -n 10
  tail -n 5 "$W/log/slurmd.log" 2>/dev/null
}

cat > "$W/check.py" <<'PYEOF'
import json, math, os, struct, sys

def read_log(path):
    plan, losses = None, []
    for line in open(path):
        d = json.loads(line)
        if "memory_plan" in d: plan = d["memory_plan"]
        if "loss" in d: losses.append((d["step"], d["loss"], d["norm"]))
    return plan, losses

def state_header(path):  # train/checkpoint.h: [2] completed steps, [6] data-parallel ranks
    h = struct.unpack("<256i", open(path, "rb").read(1024))
    return h[2], h[6]

cmd = sys.argv[1]
if cmd == "log":  # log LOG N: N consecutive steps with finite losses, written by a 2-rank ZeRO-1 world
    plan, losses = read_log(sys.argv[2]); n = int(sys.argv[3])
    steps = [x[0] for x in losses]
    if steps != list(range(1, n + 1)): sys.exit(f"steps {steps[:3]}..{steps[-3:]} ({len(steps)} lines), wanted 1..{n}")
    if not all(math.isfinite(x[1]) for x in losses): sys.exit("non-finite loss")
    if not plan or plan["world"] != 2 or plan["zero_stage"] != 1: sys.exit(f"memory_plan {plan}: wanted world 2, zero_stage 1")
    print(f"{n} steps, losses finite ({losses[0][1]:.4f} -> {losses[-1][1]:.4f}), memory_plan world 2 zero_stage 1")
elif cmd == "state":  # state FILE STEP: a state file of that step written by 2 ranks
    step, world = state_header(sys.argv[2])
    if (step, world) != (int(sys.argv[3]), 2): sys.exit(f"header: step {step}, world {world}")
    print(f"state header: step {step}, saved by {world} ranks")
elif cmd == "union":  # union REF LOG: the first occurrence of each step in LOG equals REF's, bit for bit
    _, ref = read_log(sys.argv[2]); _, got = read_log(sys.argv[3])
    first = {}
    for s, l, n in got: first.setdefault(s, (l, n))
    ref = {s: (l, n) for s, l, n in ref}
    if sorted(first) != sorted(ref): sys.exit(f"steps differ: {len(first)} logged, reference {len(ref)}")
    diff = [s for s in ref if struct.pack("<dd", *ref[s]) != struct.pack("<dd", *first[s])]
    if diff: sys.exit(f"{len(diff)} losses or norms differ, first at step {diff[0]}: {first[diff[0]]!r} vs {ref[diff[0]]!r}")
    print(f"all {len(ref)} losses and gradient norms identical")
PYEOF

# ---------------------------------------------------------------------------------------------------
# (a) a 2-rank ZeRO-1 job of 20 steps runs to completion. sbatch --wait looks at its job 2 s, then 10 s after
# submitting it (MinJobAge 600: slurm_lib.sh), long after a job of a few seconds ended; so it waits in the background
# while (b)'s reference job, submitted once (a)'s is in the queue, runs after it on the node's 2 CPUs
( id=$(submit a "$W/a" 20 --wait); echo "$? $id" > "$W/a.done" ) &
a_pid=$!
for _ in $(seq 120); do [ -e "$W/a.done" ] || [ -n "$(sl squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
ref_id=$(submit ref "$W/ref" "$REF_STEPS")
wait "$a_pid"
rc=1; id=""; read -r rc id < "$W/a.done"
if [ -z "$id" ]; then
  bad "(a) sbatch --wait scripts/sbatch_cpu.sh (exit $rc)" "$(cat "$W/a.sbatch.err")"
else
  wait_job "$id" 30
  if [ $rc -eq 0 ] && [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ]; then
    ok "(a) sbatch --wait: job $id (2 ranks, ZeRO-1, 20 steps) completed, sbatch exit 0, job exit code 0:0"
  else
    bad "(a) job $id completes with exit 0 (sbatch --wait exit $rc)" "$(job_info a)"
  fi
  # world 2 in the log's memory plan: the two tasks joined one MPI world through srun --mpi=pmix
  r=$($PY "$W/check.py" log "$W/a/log.jsonl" 20 2>&1) && ok "(a) log: $r" || bad "(a) log" "$r $(job_info a)"
  if [ -f "$W/a/model_00000020.bin" ] && [ -f "$W/a/state_00000020.bin" ] && r=$($PY "$W/check.py" state "$W/a/state_00000020.bin" 20 2>&1); then
    ok "(a) complete checkpoint: model_00000020.bin + state_00000020.bin ($r)"
  else
    bad "(a) checkpoint model_00000020.bin + state_00000020.bin" "$(ls -l "$W/a" 2>&1) ${r:-}"
  fi
fi

# ---------------------------------------------------------------------------------------------------
# (b) preemption: reference run (submitted above); the same run stopped by SIGUSR1 after >= 20 steps, then resubmitted
id=$ref_id
ref_ok=""
if [ -n "$id" ] && wait_job "$id" 120 && [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && r=$($PY "$W/check.py" log "$W/ref/log.jsonl" "$REF_STEPS" 2>&1); then
  ok "(b) uninterrupted reference job $id: $r"; ref_ok=1
else
  bad "(b) uninterrupted reference job" "${r:-} $(job_info ref)"
fi

id=$(submit pre "$W/pre" "$REF_STEPS")
stopped=""
if [ -z "$id" ]; then
  bad "(b) sbatch the job to preempt" "$(cat "$W/pre.sbatch.err")"
else
  n=$(wait_steps "$id" "$W/pre/log.jsonl" 20)
  if [ "${n:-0}" -ge 20 ] && sl scancel --signal=USR1 "$id"; then
    wait_job "$id" 60
    N=$(grep -o 'stop signal: checkpointed after step [0-9]*' "$W"/pre-"$id".out 2>/dev/null | grep -o '[0-9]*$' | tail -1)
    if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ -n "$N" ] && [ "$N" -lt "$REF_STEPS" ] &&
       [ -f "$W/pre/model_$(printf %08d "$N").bin" ] && r=$($PY "$W/check.py" state "$W/pre/state_$(printf %08d "$N").bin" "$N" 2>&1); then
      ok "(b) job $id got SIGUSR1 at step $n: 'stop signal: checkpointed after step $N', state COMPLETED, exit 0:0, checkpoint of step $N ($r)"
      stopped=1
    else
      bad "(b) job $id checkpoints and exits 0 on SIGUSR1 (sent at step $n, stopped after step ${N:-?} of $REF_STEPS)" "${r:-} $(job_info pre)"
    fi
  else
    wait_job "$id" 1
    bad "(b) job $id reaches step 20 and takes scancel --signal=USR1 (at step ${n:-0})" "$(job_info pre)"
  fi
fi

if [ -n "$stopped" ]; then
  id2=$(submit pre "$W/pre" "$REF_STEPS")
  if [ -n "$id2" ] && wait_job "$id2" 120 && [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] &&
     grep -q "resume: step $N from" "$W"/pre-"$id2".out; then
    ok "(b) resubmitted job $id2 resumed from step $N and completed, exit code 0:0"
  else
    bad "(b) resubmitted job resumes from step $N and completes" "$(job_info pre)"
  fi
  if [ -n "$ref_ok" ]; then
    r=$($PY "$W/check.py" union "$W/ref/log.jsonl" "$W/pre/log.jsonl" 2>&1) \
      && ok "(b) preempted + resumed vs uninterrupted: $r (steps 1-$N from job $id, $((N + 1))-$REF_STEPS from job $id2)" \
      || bad "(b) preempted + resumed losses equal the uninterrupted run's" "$r"
    last=$(printf %08d "$REF_STEPS")
    if cmp -s "$W/ref/model_$last.bin" "$W/pre/model_$last.bin" && cmp -s "$W/ref/state_$last.bin" "$W/pre/state_$last.bin"; then
      ok "(b) final model_$last.bin and state_$last.bin are byte-identical to the uninterrupted run's"
    else
      bad "(b) final checkpoint byte-identical to the uninterrupted run's" "$(ls -l "$W/ref" "$W/pre" 2>&1)"
    fi
  fi
fi

finish
