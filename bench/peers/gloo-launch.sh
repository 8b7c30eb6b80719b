#!/usr/bin/env bash
# Starts the ranks of a Gloo job (gloo-allreduce-bench) on this machine: one process
# per rank with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and GLOO_BENCH_STORE
# (a fresh FileStore directory, removed afterwards) in its environment. With
# --netns, each rank runs inside a network namespace (as root), so ranks in
# different namespaces talk over whatever links the namespaces (a veth pair: see
# bench/peers/netns-pair.sh). Exits with the first non-zero status of any rank,
# stopping the others; 0 when every rank succeeded.
#
#   gloo-launch.sh -n N [--store DIR] -- COMMAND [ARGS...]
#   gloo-launch.sh --netns NS:COUNT[,NS:COUNT...] [--store DIR] -- COMMAND [ARGS...]
#
# e.g.  gloo-launch.sh -n 4 -- build/bin/gloo-allreduce-bench --hostname 127.0.0.1 -b 8 -e 64M
set -euo pipefail

usage() { sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'; }
die() { echo "gloo-launch: $*" >&2; exit 2; }

ranks=0
netns=""
store=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) [ $# -ge 2 ] || die "-n needs a number"; ranks=$2; shift 2 ;;
    --netns) [ $# -ge 2 ] || die "--netns needs NS:COUNT,..."; netns=$2; shift 2 ;;
    --store) [ $# -ge 2 ] || die "--store needs a directory"; store=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (--help lists them)" ;;
  esac
done
[ $# -gt 0 ] || die "give the command after --"

# One namespace per group of ranks: "" for this one.
groups=()
if [ -n "$netns" ]; then
  [ "$ranks" -eq 0 ] || die "give -n or --netns, not both"
  IFS=, read -r -a entries <<<"$netns"
  for entry in "${entries[@]}"; do
    ns=${entry%%:*}
    count=${entry#*:}
    [[ -n "$ns" && "$entry" == *:* && "$count" =~ ^[1-9][0-9]*$ ]] ||
      die "--netns entry '$entry': want NS:COUNT"
    groups+=("$ns:$count")
    ranks=$((ranks + count))
  done
else
  [[ "$ranks" =~ ^[1-9][0-9]*$ ]] || die "-n '$ranks': want a number of ranks >= 1"
  groups=(":$ranks")
fi

made_store=0
if [ -z "$store" ]; then
  store=$(mktemp -d -t gloo-store.XXXXXX)
  made_store=1
elif [ -n "$(ls -A "$store" 2>/dev/null)" ]; then
  die "--store $store is not empty: keys left from another run would mislead the rendezvous"
fi
mkdir -p "$store"

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
cleanup() {
  stop_all
  if [ "$made_store" -eq 1 ]; then rm -rf "$store"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# RINGSYNC_BENCH_PIN="NAMESPACE=CPUS;..." (bench/compare) keeps a namespace's ranks on CPUS.
IFS=';' read -r -a pins <<<"${RINGSYNC_BENCH_PIN:-}"
rank=0
for group in "${groups[@]}"; do
  ns=${group%%:*}
  count=${group#*:}
  for ((local_rank = 0; local_rank < count; local_rank++)); do
    prefix=()
    if [ -n "$ns" ]; then prefix=(ip netns exec "$ns"); fi
    for p in ${pins[@]+"${pins[@]}"}; do
      if [ "${p%%=*}" = "$ns" ]; then prefix+=(taskset -c "${p#*=}"); fi
    done
    RANK=$rank WORLD_SIZE=$ranks LOCAL_RANK=$local_rank LOCAL_WORLD_SIZE=$count \
      GLOO_BENCH_STORE=$store "${prefix[@]}" "$@" &
    pids+=($!)
    rank=$((rank + 1))
  done
done

# The first rank to fail decides the status; the others are stopped then.
status=0
remaining=${#pids[@]}
while [ "$remaining" -gt 0 ]; do
  rc=0
  wait -n || rc=$?  # the ranks are this shell's only background jobs
  remaining=$((remaining - 1))
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
    status=$rc
    echo "gloo-launch: a rank exited with status $rc; stopping the others" >&2
    stop_all
  fi
done
exit "$status"
