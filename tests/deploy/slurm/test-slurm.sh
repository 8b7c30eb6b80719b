#!/usr/bin/env bash
# A real Slurm cluster on this machine, and ringsync jobs submitted to it.
#
# Hosts are network namespaces: a controller (slurmctld; sbatch runs there)
# and two compute nodes (one slurmd each), joined by a bridge on 198.18.1.0/24
# (RFC 2544's benchmark range: it cannot clash with a real network). Each
# slurmd runs under `nsenter --net` + `unshare --uts --mount`: its own host name,
# an /etc/hosts that names the test nodes and a run directory of its own (for
# the daemons' sockets), seen only by it and the jobs it starts (`ip netns
# exec` would remount /sys, which slurmd needs as it is). munged authenticates
# them with a key made here.
#
# Then examples/slurm/ringsync.sbatch runs twice, 2 nodes x 2 tasks: with the
# example trainer (every collective, every result checked) and with a PyTorch
# training step (weights identical on every rank; the Python must import
# torch). Each must complete with exit 0, the trainers must report their checks
# passed, and the daemons must have linked over the nodes' eth0 (they pin tcp:
# the hosts share one kernel, and UCX left to choose would use shared memory).
#
# Everything started is stopped, and every namespace and file removed, on any
# exit. Every wait is bounded. Exit 77 (skipped) only where it cannot run at all.
set -euo pipefail

source_dir=${RINGSYNC_SOURCE_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)}
build_dir=${RINGSYNC_BUILD_DIR:-$source_dir/build}

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, slurmd)"
for program in slurmctld slurmd sbatch scontrol munged ip nsenter unshare; do
  command -v "$program" >/dev/null || skip "no $program (scripts/install-deps.sh installs slurm-wlm, munge, iproute2)"
done
for program in ringsyncd ringsync ringsync-example-trainer; do
  [ -x "$build_dir/bin/$program" ] || fail "no $build_dir/bin/$program: build first"
done
# The trainers' Python: RINGSYNC_PYTHON, else the distribution's (where
# python3-torch installs), else the one on PATH; it must import torch.
python=""
for candidate in ${RINGSYNC_PYTHON:-} /usr/bin/python3 "$(command -v python3 || true)"; do
  if [ -x "$candidate" ] && "$candidate" -c 'import torch, numpy' 2>/dev/null; then python=$candidate; break; fi
done
[ -n "$python" ] || fail "no python3 that imports torch and numpy (scripts/install-deps.sh installs python3-torch; or set RINGSYNC_PYTHON)"
ip netns add "rsslurm-probe-$$" 2>/dev/null || skip "ip netns does not work here"
ip netns del "rsslurm-probe-$$"

work=$(mktemp -d /tmp/rs-slurm.XXXXXX)
chmod 755 "$work"
prefix="rsslurm-$$"
ctl="$prefix-ctl"
nodes=(rs-n1 rs-n2)
pids=()

cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do   # up to 5 s for them to exit, then SIGKILL
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  # Job processes left behind (a daemon step that outlived its job) are in the hosts' namespaces.
  for ns in "$ctl" "${nodes[@]/#/$prefix-}"; do
    if ip netns pids "$ns" >/dev/null 2>&1; then
      ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
    for log in "$work"/*.log "$work"/job-*.out; do
      [ -f "$log" ] || continue
      echo "----- $(basename "$log") (last 40 lines)"
      tail -n 40 "$log"
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Waits up to $1 seconds (and one more try) for the command after it to succeed.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  while [ "$SECONDS" -lt "$deadline" ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# ---- network: a bridge in the controller's namespace, a veth to each node
ip netns add "$ctl"
ip -n "$ctl" link set lo up
ip -n "$ctl" link add br0 type bridge
ip -n "$ctl" addr add 198.18.1.1/24 dev br0
ip -n "$ctl" link set br0 up
hosts="127.0.0.1 localhost
198.18.1.1 rsctl"
for i in "${!nodes[@]}"; do
  ns="$prefix-${nodes[$i]}"
  address="198.18.1.$((i + 2))"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ctl" link add "v$i" type veth peer name eth0 netns "$ns"
  ip -n "$ctl" link set "v$i" master br0 up
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  hosts+="
$address ${nodes[$i]}"
done
echo "$hosts" >"$work/hosts"

# ---- munge: a key of this test's own
mkdir -m 711 "$work/munge"  # others may reach the socket, not list the key
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$work/munge/munge.key"
munged --force --socket="$work/munge/munge.sock" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munge/seed"
wait_for 10 test -f "$work/munge/munged.pid" || fail "munged did not start"
pids+=("$(cat "$work/munge/munged.pid")")

# ---- Slurm
mkdir -p "$work/ctld" "${nodes[@]/#/$work/spool/}"
cat >"$work/slurm.conf" <<CONF
ClusterName=rstest
SlurmctldHost=rsctl(198.18.1.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.sock
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=rs-n1 NodeAddr=198.18.1.2 CPUs=4 RealMemory=2048 State=UNKNOWN
NodeName=rs-n2 NodeAddr=198.18.1.3 CPUs=4 RealMemory=2048 State=UNKNOWN
PartitionName=rs Nodes=rs-n[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf

# Runs a command on a test host: its network, its host name, its /etc/hosts,
# and a run directory of its own at $work/run (the daemons' sockets: nodes
# share /tmp here, but not their /run on a real cluster).
on_host() {
  local name=$1 ns=$2
  shift 2
  mkdir -p "$work/run" "$work/host-run/$name"
  # shellcheck disable=SC2016  # expanded by the inner sh
  nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
    sh -c 'hostname "$0" && mount --bind "$1" /etc/hosts && mount --bind "$2" "$3" && shift 3 && exec "$@"' \
    "$name" "$work/hosts" "$work/host-run/$name" "$work/run" "$@"
}

on_host rsctl "$ctl" slurmctld -D -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
pids+=($!)
for node in "${nodes[@]}"; do
  on_host "$node" "$prefix-$node" slurmd -D -N "$node" -f "$SLURM_CONF" >"$work/slurmd-$node.out" 2>&1 &
  pids+=($!)
done

# A Slurm command from the controller host; a controller that does not answer fails it in 20 s.
in_ctl() { timeout 20 nsenter --net="/run/netns/$ctl" "$@"; }
nodes_idle() { [ "$(in_ctl sinfo -h -N -o '%t' | grep -c '^idle')" -eq "${#nodes[@]}" ]; }
wait_for 60 nodes_idle || fail "the nodes did not come up idle in 60 s: $(in_ctl sinfo -N 2>&1 || true)"
echo "Slurm is up: $(in_ctl sinfo -h -N -o '%N %t' | tr '\n' ' ')"

# ---- jobs
# The job inherits this environment: the programs from the build, the Python
# package from the tree, and daemons that pin tcp (the nodes share a kernel:
# left to choose, UCX would link them through shared memory).
export PATH="$build_dir/bin:$PATH"
export PYTHONPATH="$source_dir/client/python${PYTHONPATH:+:$PYTHONPATH}"
export RINGSYNC_LIBRARY="$build_dir/lib/libringsync.so"
export RINGSYNC_UCX_TRANSPORTS=tcp,self
export RINGSYNC_METRICS_ADDRESS=off
export XDG_RUNTIME_DIR="$work/run"   # the daemons' sockets: each host's own (on_host)
unset RINGSYNC_SOCKET RINGSYNC_JOB_ID RINGSYNC_NODES RINGSYNC_NODE_RANK RINGSYNC_NUM_NODES

# Submits examples/slurm/ringsync.sbatch with the given training command, waits
# for it (at most 240 s), and checks it completed with exit code 0.
run_job() {
  local name=$1
  shift
  local id
  id=$(in_ctl sbatch --parsable --job-name="$name" --time=5 --output="$work/job-%j.out" --chdir="$work" \
    "$source_dir/examples/slurm/ringsync.sbatch" "$@")
  echo "job $id ($name): $*"
  local state=""
  for _ in $(seq 2400); do
    state=$(in_ctl scontrol show job "$id" -o | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$state" in PENDING|CONFIGURING|RUNNING|COMPLETING|"") sleep 0.1 ;; *) break ;; esac
  done
  local record
  record=$(in_ctl scontrol show job "$id" -o)
  output="$work/job-$id.out"
  [ "$state" = COMPLETED ] || { cat "$output" 2>/dev/null || true; fail "job $id ($name) ended $state: $record"; }
  grep -q 'ExitCode=0:0' <<<"$record" || fail "job $id ($name): $record"
  echo "job $id ($name): COMPLETED, exit 0"
}

run_job example ringsync-example-trainer --steps 5
passed=$(grep -c 'ringsync-example-trainer: rank [0-9]/4: all [0-9]* results correct' "$output" || true)
[ "$passed" -eq 4 ] || { cat "$output"; fail "expected 4 ranks to report all results correct, got $passed"; }
for peer in 0 1; do
  grep -q "node $peer (rs-n$((peer + 1)):29517) over tcp/eth0" "$output" ||
    { cat "$output"; fail "no daemon logged its link to node $peer over tcp/eth0"; }
done
grep -q "a step of Slurm job" "$output" || { cat "$output"; fail "the daemons did not see they run under Slurm"; }
echo "example trainer: 4/4 ranks verified every collective; the daemons linked over eth0"

run_job pytorch "$python" "$source_dir/examples/pytorch_train.py"
grep -q "training on 4 ranks (2 nodes x 2)" "$output" || { cat "$output"; fail "the PyTorch step did not see 2 nodes x 2"; }
grep -q "weights identical on all ranks: True" "$output" || { cat "$output"; fail "PyTorch weights differ"; }
echo "PyTorch step ($python): $(grep 'weights identical' "$output")"
echo "PASSED"
