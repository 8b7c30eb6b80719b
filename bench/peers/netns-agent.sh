#!/usr/bin/env bash
# mpirun's launch agent for network namespaces on this machine, in place of ssh:
# mpirun runs `netns-agent.sh HOST COMMAND...` to start its daemon on HOST, and
# this runs COMMAND inside the network namespace named HOST (so a hostfile names
# namespaces), with HOST as its host name too (a UTS namespace of its own): Open
# MPI names its shared-memory segments after the host, and two "hosts" of one name
# on one /dev/shm would share them and crash. Needs root, as ip netns exec does.
# RINGSYNC_BENCH_PIN="HOST=CPUS;..." (bench/compare) keeps HOST's processes on CPUS.
#
#   mpirun --allow-run-as-root --mca plm_rsh_agent "$PWD/bench/peers/netns-agent.sh" \
#          --host rsbp-0:2,rsbp-1:2 ...
set -euo pipefail

# mpirun may put ssh-style options before the host; none of them matter here.
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
[ $# -ge 2 ] || { echo "netns-agent: usage: netns-agent.sh HOST COMMAND..." >&2; exit 2; }
host=$1
shift
pin=()
IFS=';' read -r -a pins <<<"${RINGSYNC_BENCH_PIN:-}"
for p in ${pins[@]+"${pins[@]}"}; do
  if [ "${p%%=*}" = "$host" ]; then pin=(taskset -c "${p#*=}"); fi
done
# As with ssh, the command arrives as shell text (mpirun quotes it for a shell).
exec ip netns exec "$host" ${pin[@]+"${pin[@]}"} unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' \
  "$host" "$*"
