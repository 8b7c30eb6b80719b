#!/usr/bin/env bash
# Two simulated hosts as containers or pods are: network namespaces joined by a
# bridge (198.18.0.0/15), each host's processes in a UTS namespace of its own
# with its own hostname, the IPC namespace shared; one ringsyncd per host on
# the default --ucx-transports (UCX's own choice), and 2 ringsync-bench ranks
# per host. Exits 0 when every rank passed, and prints the lanes node 0 chose
# for its peer and why shared memory was avoided (docs/ucx.md, "Daemons that
# share a machine"). Needs root; removes what it made.
#
#   bench/namespace_hosts.sh [BUILD_DIR] -- RINGSYNC_BENCH_ARGS...
#   bench/namespace_hosts.sh build -- -b 128K -e 2M -f 2 -n 300
set -euo pipefail
bin=$(cd "${1:-build}" && pwd)/bin
shift || true
[ "${1:-}" = "--" ] && shift
[ -x "$bin/ringsyncd" ] && [ -x "$bin/ringsync-bench" ] || { echo "namespace_hosts: no ringsyncd/ringsync-bench in $bin" >&2; exit 2; }
prefix="rsnh-$$"
work=$(mktemp -d)
cleanup() {
  pkill -f "ringsyncd --hostfile $work/" 2>/dev/null || true
  sleep 0.3
  for n in "$prefix-0" "$prefix-1" "$prefix-br"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$prefix-br"
ip -n "$prefix-br" link add br0 type bridge
ip -n "$prefix-br" link set br0 up
for i in 0 1; do
  ip netns add "$prefix-$i"
  ip link add eth0 netns "$prefix-$i" type veth peer name "v$i" netns "$prefix-br"
  ip -n "$prefix-br" link set "v$i" master br0
  ip -n "$prefix-br" link set "v$i" up
  ip -n "$prefix-$i" link set lo up
  ip -n "$prefix-$i" addr add "198.18.0.$((i + 1))/24" dev eth0
  ip -n "$prefix-$i" link set eth0 up
done
for i in 0 1; do  # the veth carrier comes up a moment later
  for _ in $(seq 50); do ip -n "$prefix-$i" link show eth0 | grep -q LOWER_UP && break; sleep 0.1; done
done
printf '198.18.0.1:29600 slots=2\n198.18.0.2:29600 slots=2\n' > "$work/hosts"
on_host() {  # on_host I COMMAND...: in host I's network namespace, with its own hostname
  local i=$1
  shift
  ip netns exec "$prefix-$i" unshare --uts sh -c "hostname nshost$i && exec \"\$@\"" sh "$@"
}
for i in 0 1; do
  on_host "$i" "$bin/ringsyncd" --hostfile "$work/hosts" --node-rank "$i" --control-address "198.18.0.$((i + 1)):29600" \
    --ucx-net-devices eth0 --job-id nh --job-token nh-token --socket "$work/rs$i.sock" \
    --metrics-address "198.18.0.$((i + 1)):9400" > "$work/daemon$i.log" 2>&1 &
done
for i in 0 1; do
  for _ in $(seq 100); do [ -S "$work/rs$i.sock" ] && break; sleep 0.1; done
done
pids=()
for i in 0 1; do
  for r in 0 1; do
    RINGSYNC_SOCKET="$work/rs$i.sock" RINGSYNC_JOB_ID=nh RINGSYNC_JOB_TOKEN=nh-token RINGSYNC_LOCAL_RANK=$r \
      RINGSYNC_LOCAL_SIZE=2 on_host "$i" timeout 900 "$bin/ringsync-bench" "$@" > "$work/rank$i$r.log" 2>&1 &
    pids+=($!)
  done
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
grep -q "Out of bounds values : 0 OK" "$work/rank00.log" || status=1
grep -h ') over ' "$work/daemon0.log" | tail -1 | sed 's/^.*job /node 0: job /'
if [ "$status" != 0 ]; then
  echo "namespace_hosts: a rank failed" >&2
  tail -n 5 "$work"/rank*.log "$work/daemon0.log" >&2
else
  grep -v '^#' "$work/rank00.log" | tail -n 1
fi
exit "$status"
