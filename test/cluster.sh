#!/usr/bin/env bash
# cluster.sh: a Slurm cluster of N simulated nodes on this one machine (2 by default), for the multi-node
# tests and by hand. As root:
#   bash test/cluster.sh                         # 2 nodes; a shell on the login host, the cluster goes away when it exits
#   bash test/cluster.sh -n 3 sinfo -N           # 3 nodes; run one command on the login host, then tear down
# Sourced by a test: `source test/cluster.sh`, then `cluster_up N` (0: up; 1: failed, reason in SLURM_ERR;
# 2: this machine cannot make namespaces, reason in CLUSTER_SKIP), `login CMD...` (a command on the login
# host, environment passed), `on_node NAME CMD...`, `sl CMD...` (a Slurm client command, bounded),
# `node_kill NAME`, `node_revive NAME`, and `cluster_down` (idempotent; also the EXIT trap's job).
#
# How: each node is a network + UTS + mount namespace held open by a `sleep` (its hostname is the node's,
# /etc/hosts is a bind-mounted file naming every node, and CLUSTER_DIR/local is a directory of its own, the
# stand-in for a node-local disk). A bridge in the controller's namespace ("ctl", CLUSTER_NET.1) links one
# veth per node (nodeI: CLUSTER_NET.(10+I)); nothing is created in this machine's own network namespace and
# nothing is routed out. munged and slurmctld run in ctl, one slurmd in each node (-N nodeI); the job shell,
# srun's steps and the ranks run inside their node. The rest of the file system is shared, as a cluster's
# shared file system would be. Namespaces are entered with nsenter (`ip netns exec` remounts /sys, and slurmd
# then dies on the missing cgroup mount). Per-node paths use %n (spool, TmpFS, pid and log files), or the
# nodes' PMIx directories collide. Stopping a slurmd leaves its job steps running, so the teardown ends every
# process left in each namespace.
# MPI inside: the login environment pins Open MPI's TCP traffic to the bridge's subnet
# (OMPI_MCA_btl_tcp_if_include, OMPI_MCA_oob_tcp_if_include), which sbatch and srun pass on to the ranks.

CLUSTER_NET=${CLUSTER_NET:-10.217.0}
CLUSTER_DIR=""; CLUSTER_CONF=""; CLUSTER_CTL=""; CLUSTER_NODES=(); CLUSTER_SKIP=""; CLUSTER_TORN=""
declare -A CLUSTER_PID=()
source "$(dirname "${BASH_SOURCE[0]}")/slurm_lib.sh"

# in_ns PID CMD...: CMD inside the namespaces held by PID, in the current directory
in_ns() { local p=$1; shift; nsenter -t "$p" --net --uts --mount --wd="$PWD" "$@"; }
# the environment every command on the cluster gets
cluster_env() {
  env SLURM_CONF="$CLUSTER_CONF" OMPI_MCA_btl_tcp_if_include="$CLUSTER_NET.0/24" OMPI_MCA_oob_tcp_if_include="$CLUSTER_NET.0/24" "$@"
}
login() { in_ns "$CLUSTER_CTL" "$(command -v env)" SLURM_CONF="$CLUSTER_CONF" OMPI_MCA_btl_tcp_if_include="$CLUSTER_NET.0/24" \
            OMPI_MCA_oob_tcp_if_include="$CLUSTER_NET.0/24" "$@"; }
on_node() { local n=$1; shift; in_ns "${CLUSTER_PID[$n]}" "$(command -v env)" SLURM_CONF="$CLUSTER_CONF" "$@"; }
sl() { login timeout 20 "$@"; }

# holder NAME: a sleeping process in new network, UTS and mount namespaces, hostname NAME, /etc/hosts ours,
# and for a node CLUSTER_DIR/local replaced by its own directory. Prints its pid once it is ready.
holder() {
  local name=$1 ready=$CLUSTER_DIR/run/$1.ready localdir=""
  [ "$name" != ctl ] && localdir=$CLUSTER_DIR/nodes/$name/local && mkdir -p "$localdir"
  # a plain command, not a function, so that $! is the process that becomes the holder
  env SLURM_CONF="$CLUSTER_CONF" unshare --net --uts --mount --propagation private -- bash -c '
    hostname "$1" && mount --bind "$2" /etc/hosts || exit 1
    if [ -n "$3" ]; then mount --bind "$3" "$4" || exit 1; fi
    touch "$5"; exec sleep infinity' holder "$name" "$CLUSTER_DIR/hosts" "$localdir" "$CLUSTER_DIR/local" "$ready" \
    > "$CLUSTER_DIR/log/$name.holder" 2>&1 < /dev/null &
  local pid=$!
  for _ in $(seq 100); do [ -e "$ready" ] && break; alive "$pid" || return 1; sleep 0.05; done
  # never hand out this machine's own namespaces: everything done "in" the holder would be done here
  [ -e "$ready" ] && [ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/$$/ns/net)" ] &&
    [ "$(readlink "/proc/$pid/ns/uts")" != "$(readlink /proc/$$/ns/uts)" ] || { kill "$pid" 2>/dev/null; return 1; }
  echo "$pid"
}

# pids_in_netns PID: every process in the network namespace PID is in (PID included). One stat reads every
# process's namespace (its inode); a readlink per process took seconds of the teardown on a busy machine.
pids_in_netns() {
  local ns
  ns=$(stat -L -c %i "/proc/$1/ns/net" 2>/dev/null) || return 0
  [ "$ns" = "$(stat -L -c %i /proc/$$/ns/net)" ] && return 0   # never this machine's own
  stat -L -c '%i %n' /proc/[0-9]*/ns/net 2>/dev/null | awk -v ns="$ns" '$1 == ns { split($2, p, "/"); print p[3] }'
}
# kill_netns PID: TERM then KILL everything in that network namespace, holder last
kill_netns() {
  local h=$1 left
  # shellcheck disable=SC2046
  kill -TERM $(pids_in_netns "$h" | grep -vx "$h") 2>/dev/null
  for _ in $(seq 20); do left=$(pids_in_netns "$h" | grep -vx "$h" | while read -r p; do alive "$p" && echo "$p"; done); [ -z "$left" ] && break; sleep 0.1; done
  # shellcheck disable=SC2086
  [ -n "$left" ] && kill -KILL $left 2>/dev/null
  kill -KILL "$h" 2>/dev/null
  for _ in $(seq 20); do alive "$h" || break; sleep 0.05; done
}

# node_kill NAME: the node dies as a machine does: its link goes down first (no peer sees a connection
# closed), then its slurmd, the job's processes on it and everything else in its namespace are killed
node_kill() {
  local h=${CLUSTER_PID[$1]}
  in_ns "$h" ip link set eth0 down 2>/dev/null
  # shellcheck disable=SC2046
  kill -KILL $(pids_in_netns "$h" | grep -vx "$h") 2>/dev/null
}

# node_revive NAME: a replacement for a node lost with node_kill, under the same name: empty spool and TmpFS
# (the killed step's PMIx socket is still in the old spool, and the requeued job's step has the same id, so
# its slurmstepd could not bind it), the link up, and a new slurmd, which registers with slurmctld
node_revive() {
  local h=${CLUSTER_PID[$1]}
  rm -rf "${CLUSTER_DIR:?}/spool/$1" "$CLUSTER_DIR/tmp/$1" && mkdir -p "$CLUSTER_DIR/spool/$1" "$CLUSTER_DIR/tmp/$1" &&
    in_ns "$h" ip link set eth0 up &&
    on_node "$1" timeout 30 slurmd -f "$CLUSTER_CONF" -N "$1" >> "$CLUSTER_DIR/log/slurmd.$1.start" 2>&1
}

cluster_up() {
  local n=${1:-2} i name ip node ncpu state t0=$SECONDS
  SLURM_ERR=""; CLUSTER_SKIP=""
  slurm_clean_env
  if [ "$(id -u)" -ne 0 ]; then CLUSTER_SKIP="needs root (network namespaces, a bridge, Slurm's daemons)"; return 2; fi
  # the stack is installed by `make test-cluster` (or .ci/run), never here; without it nothing is made at all
  local missing; missing=$(slurm_missing)
  if [ -n "$missing" ]; then CLUSTER_SKIP="Slurm is not installed ($missing); $SLURM_ENABLE"; return 2; fi
  for c in unshare nsenter ip; do
    command -v "$c" >/dev/null || { CLUSTER_SKIP="no $c on the PATH (apt-get install util-linux iproute2)"; return 2; }
  done
  local why
  if ! why=$(unshare --net --uts --mount --propagation private -- sh -c \
      'ip link add cltestbr type bridge && ip link add cltv0 type veth peer name cltv1 && ip link set cltv0 master cltestbr' 2>&1); then
    CLUSTER_SKIP="this machine cannot make network namespaces with a bridge and veth pairs (a container without CAP_SYS_ADMIN/CAP_NET_ADMIN, or no bridge/veth in the kernel): $(head -1 <<<"$why")"
    return 2
  fi
  CLUSTER_DIR=$(mktemp -d /tmp/cluster.XXXXXX)
  chmod 755 "$CLUSTER_DIR"
  CLUSTER_CONF=$CLUSTER_DIR/slurm.conf
  mkdir -p "$CLUSTER_DIR"/{run,log,state,spool,tmp,local} && chmod 700 "$CLUSTER_DIR/state"
  CLUSTER_NODES=()
  { echo "127.0.0.1 localhost"; echo "$CLUSTER_NET.1 ctl"; } > "$CLUSTER_DIR/hosts"
  for i in $(seq "$n"); do
    CLUSTER_NODES+=("node$i"); echo "$CLUSTER_NET.$((10 + i)) node$i" >> "$CLUSTER_DIR/hosts"
    mkdir -p "$CLUSTER_DIR/spool/node$i" "$CLUSTER_DIR/tmp/node$i"
  done
  # the namespaces and the network: a bridge in ctl, a veth from it to each node
  CLUSTER_CTL=$(holder ctl) || { SLURM_ERR="cannot start the ctl namespace: $(cat "$CLUSTER_DIR/log/ctl.holder")"; return 1; }
  CLUSTER_PID[ctl]=$CLUSTER_CTL
  in_ns "$CLUSTER_CTL" sh -c "ip link set lo up && ip link add br0 type bridge && ip addr add $CLUSTER_NET.1/24 dev br0 && ip link set br0 up" \
    > "$CLUSTER_DIR/log/net.log" 2>&1 || { SLURM_ERR="bridge: $(cat "$CLUSTER_DIR/log/net.log")"; return 1; }
  for name in "${CLUSTER_NODES[@]}"; do
    CLUSTER_PID[$name]=$(holder "$name") || { SLURM_ERR="cannot start the $name namespace: $(cat "$CLUSTER_DIR/log/$name.holder")"; return 1; }
    i=${name#node}; ip=$CLUSTER_NET.$((10 + i))
    { in_ns "$CLUSTER_CTL" sh -c "ip link add v$name type veth peer name eth0 netns ${CLUSTER_PID[$name]} && ip link set v$name master br0 && ip link set v$name up" &&
      in_ns "${CLUSTER_PID[$name]}" sh -c "ip link set lo up && ip addr add $ip/24 dev eth0 && ip link set eth0 up"; } >> "$CLUSTER_DIR/log/net.log" 2>&1 ||
      { SLURM_ERR="veth for $name: $(tail -n 3 "$CLUSTER_DIR/log/net.log")"; return 1; }
  done
  munge_start "$CLUSTER_DIR/munge" in_ns "$CLUSTER_CTL" || return 1
  node=$(slurm_node_line)
  cat > "$CLUSTER_CONF" <<EOF
# a cluster of $n simulated nodes written by test/cluster.sh
ClusterName=mnci
SlurmctldHost=ctl($CLUSTER_NET.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=$CLUSTER_DIR/run/slurmctld.pid
SlurmctldLogFile=$CLUSTER_DIR/log/slurmctld.log
SlurmdSpoolDir=$CLUSTER_DIR/spool/%n
TmpFS=$CLUSTER_DIR/tmp/%n
SlurmdPidFile=$CLUSTER_DIR/run/slurmd.%n.pid
SlurmdLogFile=$CLUSTER_DIR/log/slurmd.%n.log
$(slurm_conf_common "$CLUSTER_DIR/munge/munge.socket" "$CLUSTER_DIR/state")
# a lost node (test_multinode.sh's (f)) is marked down some SlurmdTimeout + MessageTimeout after its last answer,
# and the job waits for that: 6 s, not 10, still far beyond a live slurmd's answer on a busy machine (milliseconds)
SlurmdTimeout=6
MessageTimeout=5
EOF
  for name in "${CLUSTER_NODES[@]}"; do
    echo "NodeName=$name NodeAddr=$CLUSTER_NET.$((10 + ${name#node})) $node State=UNKNOWN" >> "$CLUSTER_CONF"
  done
  echo "PartitionName=ci Nodes=node[1-$n] Default=YES MaxTime=INFINITE State=UP" >> "$CLUSTER_CONF"
  # Every PMIx fence by the ring algorithm. By default the pmix plugin (22.05) runs a fence that carries no data
  # by its tree, and here each node's slurmstepd is the root of a tree of one (its log: "child_cntr=0 ... local
  # delivery"), so such a fence returns at once on each node. Open MPI 4.1's last step of MPI_Init is such a
  # fence, its only barrier: a rank left MPI_Init while its peer on the other node still waited for the modex
  # fence, and its first message hit that peer's TCP BTL before ob1 had registered a handler, a call through
  # NULL (the two-node jobs' rare "Segmentation fault ... Failing at address: (nil)" in PMPI_Init).
  echo "PMIxCollFence=ring" > "$CLUSTER_DIR/mpi.conf"
  login timeout 30 slurmctld -f "$CLUSTER_CONF" > "$CLUSTER_DIR/log/slurmctld.start" 2>&1
  for name in "${CLUSTER_NODES[@]}"; do
    on_node "$name" timeout 30 slurmd -f "$CLUSTER_CONF" -N "$name" > "$CLUSTER_DIR/log/slurmd.$name.start" 2>&1
  done
  for _ in $(seq 120); do   # 30 s
    state=$(sl sinfo -h -N -o %T 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$state" = "idle " ] && [ "$(sl sinfo -h -N -o %N 2>/dev/null | wc -l)" -eq "$n" ] && break
    sleep 0.25
  done
  if [ "$state" != "idle " ]; then
    SLURM_ERR="the nodes are not idle (sinfo: '${state:-none}'): $(tail -n 4 "$CLUSTER_DIR"/log/*.start "$CLUSTER_DIR"/log/*.log 2>/dev/null)"
    return 1
  fi
  CLUSTER_UP_S=$((SECONDS - t0))
}

# cluster_down: jobs cancelled, the daemons stopped, every process in every namespace of ours ended, the
# namespaces gone with their holders, the directory removed. Sets CLUSTER_LEFT (pids still there, normally
# none) and CLUSTER_DOWN_S.
cluster_down() {
  [ -n "$CLUSTER_TORN" ] && return 0
  CLUSTER_TORN=1
  local t0=$SECONDS name ids left
  [ -n "$CLUSTER_DIR" ] && [ -d "$CLUSTER_DIR" ] || return 0
  if [ -n "$CLUSTER_CTL" ] && alive "$CLUSTER_CTL" && [ -f "$CLUSTER_DIR/run/slurmctld.pid" ]; then
    ids=$(login timeout 5 squeue -h -o %i 2>/dev/null)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      login timeout 5 scancel $ids 2>/dev/null
      for _ in $(seq 20); do [ -z "$(login timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
    fi
  fi
  for name in "${CLUSTER_NODES[@]}"; do [ -n "${CLUSTER_PID[$name]:-}" ] && kill_netns "${CLUSTER_PID[$name]}"; done
  [ -n "$CLUSTER_CTL" ] && kill_netns "$CLUSTER_CTL"
  left=$(pids_with_env "SLURM_CONF=$CLUSTER_CONF")
  # shellcheck disable=SC2086
  [ -n "$left" ] && { kill -KILL $left 2>/dev/null; sleep 0.3; }
  CLUSTER_LEFT=$(pids_with_env "SLURM_CONF=$CLUSTER_CONF" | while read -r p; do alive "$p" && echo "$p"; done | tr '\n' ' ')
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DOWN_S=$((SECONDS - t0))
}

# run by hand: bring it up, run the command (or a shell) on the login host, tear down on any exit
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  cd "$(dirname "$0")/.." || exit 1
  nodes=2
  if [ "${1:-}" = -n ]; then nodes=$2; shift 2; fi
  trap 'cluster_down; echo "cluster.sh: down (${CLUSTER_DOWN_S:-0} s)${CLUSTER_LEFT:+, left: $CLUSTER_LEFT}" >&2' EXIT
  trap 'exit 130' INT TERM
  cluster_up "$nodes"; rc=$?
  [ $rc -eq 2 ] && { echo "cluster.sh: $CLUSTER_SKIP" >&2; exit 2; }
  [ $rc -ne 0 ] && { echo "cluster.sh: $SLURM_ERR" >&2; exit 1; }
  echo "cluster.sh: ${CLUSTER_NODES[*]} up in $CLUSTER_UP_S s; SLURM_CONF=$CLUSTER_CONF; shared out-dirs anywhere but $CLUSTER_DIR/local (node-local)" >&2
  if [ $# -eq 0 ]; then set -- bash -i; fi
  login "$@"
  exit $?
fi
