# slurm_lib.sh: what the Slurm tests share (sourced by test/test_slurm.sh and test/cluster.sh): installing
# Slurm, munge and the PMIx plugin's library on a Debian machine without an init system, starting munged on
# a private key and socket, the slurm.conf lines every test cluster has, stopping daemons by their pid files,
# and waiting for a job with every wait bounded. A function that fails leaves its reason in SLURM_ERR.
# The caller defines `sl CMD...`: a Slurm client command run against its own cluster.

# a test run inside a Slurm job or under mpirun must not hand that job's variables to ours
slurm_clean_env() {
  local v
  for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_|PMIX_|PMI_|OMPI_COMM_WORLD_)'); do unset "$v"; done
}

alive() {  # alive PID: running (a zombie, which pid 1 may be slow to reap, counts as gone); no fork, as teardowns poll it
  local st
  { read -r st < "/proc/$1/stat"; } 2>/dev/null || return 1
  st=${st##*) }; st=${st%% *}   # the state follows the command's closing parenthesis
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

stop_pidfile() {  # stop_pidfile FILE: TERM, up to 10 s, then KILL
  [ -f "$1" ] || return 0
  local pid; pid=$(cat "$1" 2>/dev/null)
  [ -n "$pid" ] && alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 200); do alive "$pid" || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null; sleep 0.2
}

# pids_with_env VAR=VALUE: every process (but this shell) whose environment holds that exact entry; the
# daemons, slurmstepd, srun and the ranks all inherit the SLURM_CONF they were started with. One grep reads
# every environment (NUL-separated entries, -z); a pipeline per process took seconds on a busy machine.
pids_with_env() {
  grep -lszxF -- "$1" /proc/[0-9]*/environ | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$"
}

# slurm_missing: what of the Slurm stack is absent (packages, commands, the mpi/pmix plugin), one line; empty
# when everything is there. Installs and starts nothing: `make test` asks this and skips the Slurm suites.
slurm_missing() {
  local p c plugin missing=""
  for p in slurm-wlm munge libpmix-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -n "$missing" ] && { echo "${missing# }"; return 0; }  # the packages say it; their commands are missing too
  for c in munged munge unmunge sbatch srun squeue scontrol scancel sinfo slurmctld slurmd; do
    command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
  done
  plugin=$(dpkg -L slurm-wlm-basic-plugins 2>/dev/null | grep '/mpi_pmix.so$' | head -1)
  [ -n "$plugin" ] && [ -e "$plugin" ] || missing="$missing mpi_pmix.so"
  echo "${missing# }"
}

# slurm_install: slurm-wlm, munge and libpmix-dev (Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so
# that only the -dev package has), installed when missing, without letting their maintainer scripts start
# daemons; then checks every command and the plugin are there. Prints "installing ..." when it installs.
# Only `make test-cluster` and .ci/run call it (`bash test/slurm_lib.sh install`); the tests never do.
slurm_install() {
  local need=() p made_policy="" out rc missing
  SLURM_ERR=""
  for p in slurm-wlm munge libpmix-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then SLURM_ERR="installing ${need[*]} needs root"; return 1; fi
    echo "installing ${need[*]}"
    # no init system here: keep the packages' maintainer scripts from starting munge/slurmd/slurmctld
    if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1; fi
    # another apt may hold the dpkg lock for a while (a machine still installing): wait for it, bounded
    out=$( { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get -o DPkg::Lock::Timeout=240 update -qq &&
             DEBIAN_FRONTEND=noninteractive timeout 600 apt-get -o DPkg::Lock::Timeout=240 install -y -qq --no-install-recommends "${need[@]}"; } 2>&1 )
    rc=$?
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
    if [ $rc -ne 0 ]; then SLURM_ERR="install ${need[*]} (apt-get exit $rc): $(tail -n 5 <<<"$out")"; return 1; fi
  fi
  missing=$(slurm_missing)
  if [ -n "$missing" ]; then SLURM_ERR="missing after installing: $missing"; return 1; fi
}
# how the Slurm suites' SKIP lines say to enable them
SLURM_ENABLE="as root, \`make test-cluster\` installs slurm-wlm, munge and libpmix-dev and runs the Slurm suites (and \`make test\` runs them from then on); .ci/run does so before \`make test\`"
slurm_versions() {
  echo "Slurm $(slurmd -V 2>/dev/null | awk '{print $2}'), munge $(munged -V 2>/dev/null | awk '{print $1}' | sed 's/munge-//') and the mpi/pmix plugin"
}

# munge_start DIR [LAUNCH...]: munged on its own key, socket, pid and log files in DIR (DIR/munge.socket),
# started through LAUNCH (e.g. nsenter into a namespace) when given; checks that a credential round-trips
munge_start() {
  local d=$1; shift
  SLURM_ERR=""
  mkdir -p "$d" && chmod 755 "$d"   # munged wants its socket's directories searchable by everyone
  if command -v mungekey >/dev/null 2>&1; then mungekey --create --keyfile="$d/munge.key" >/dev/null 2>&1
  else dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 2>/dev/null; fi
  chmod 600 "$d/munge.key"
  "$@" munged --key-file="$d/munge.key" --socket="$d/munge.socket" --pid-file="$d/munged.pid" \
    --log-file="$d/munged.log" --seed-file="$d/munged.seed" > "$d/start.out" 2>&1
  for _ in $(seq 50); do [ -S "$d/munge.socket" ] && break; sleep 0.1; done
  if ! timeout 10 munge -S "$d/munge.socket" -n 2>/dev/null | timeout 10 unmunge -S "$d/munge.socket" >/dev/null 2>&1; then
    SLURM_ERR="munged does not start or round-trip a credential: $(cat "$d/start.out" "$d/munged.log" 2>/dev/null | tail -n 5)"
    return 1
  fi
}

# slurm_node_line: the node as slurmd sees it (CPUs, sockets, cores, threads, memory); else nproc and /proc/meminfo
slurm_node_line() {
  local node
  node=$(slurmd -C 2>/dev/null | head -1 | grep -o 'CPUs=.*')
  [ -n "$node" ] || node="CPUs=$(nproc) RealMemory=$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)"
  echo "$node"
}

# slurm_conf_common MUNGE_SOCKET STATE_DIR: the slurm.conf lines every test cluster shares: root runs the
# daemons, munge on our socket, no cgroups (proctrack/linuxproc, task/none), PMIx as the MPI plugin, CPUs as
# the consumable, nothing accounted, a node that comes back is used again, finished jobs kept 10 min for scontrol
# (Slurm 22.05 takes no MinJobAge under 2, and one that small purges a job a suite has not looked at yet; the price:
# `sbatch --wait` sleeps 2, 8, then 32 s between its looks at the job, MinJobAge / 2 permitting), and a batch job
# starts when it is submitted (batch_sched_delay=0: Slurm's default of 3 s held every job 2.5-3 s in the queue)
slurm_conf_common() {
  cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$1
StateSaveLocation=$2
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
MinJobAge=600
EOF
}

# wait_job ID SECONDS: until the job has ended; sets JOB_STATE and JOB_EXIT (e.g. COMPLETED, 0:0). Polls
# scontrol (sbatch --wait polls far more slowly).
wait_job() {
  local end=$((SECONDS + $2)) line
  JOB_STATE=""; JOB_EXIT=""
  while [ $SECONDS -lt $end ]; do
    line=$(sl scontrol show job -o "$1" 2>/dev/null)
    JOB_STATE=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2)
    JOB_EXIT=$(grep -o ' ExitCode=[0-9:]*' <<<"$line" | cut -d= -f2)
    case "$JOB_STATE" in
      ""|PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING|SIGNALING|STAGE_OUT) sleep 0.25 ;;
      *) return 0 ;;
    esac
  done
  return 1
}

# steps_in LOG: how many step lines a run's JSON log holds so far
steps_in() { grep -c '"loss"' "$1" 2>/dev/null || true; }
# wait_steps ID LOG N: waits (at most 60 s) until job ID's LOG holds N steps or the job has left the pending and
# running states; prints the steps it saw. The caller's sl runs Slurm's commands on its cluster.
wait_steps() {
  local id=$1 log=$2 want=$3 end=$((SECONDS + 60)) n=0 st
  while [ -n "$id" ] && [ $SECONDS -lt $end ]; do
    n=$(steps_in "$log"); [ "${n:-0}" -ge "$want" ] && break
    st=$(sl scontrol show job -o "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$st" in ""|PENDING|CONFIGURING|RUNNING) ;; *) break ;; esac
    sleep 0.1
  done
  echo "${n:-0}"
}

# by hand (make test-cluster, .ci/run): `bash test/slurm_lib.sh install`
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  if [ "${1:-}" != install ]; then echo "usage: bash test/slurm_lib.sh install   (as root: slurm-wlm, munge, libpmix-dev)" >&2; exit 2; fi
  slurm_install || { echo "slurm_lib.sh: $SLURM_ERR" >&2; exit 1; }
  echo "slurm_lib.sh: $(slurm_versions) are installed"
fi
