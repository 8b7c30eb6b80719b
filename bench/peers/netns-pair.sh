#!/usr/bin/env bash
# Two network namespaces joined by a veth pair: a stand-in for two hosts on one
# link, for running the peer benchmarks (and ringsync) across a network on one
# machine. Needs root. Namespaces PREFIX-0 and PREFIX-1; in each, the link is
# named rsb0, with 198.18.0.1/24 in PREFIX-0 and 198.18.0.2/24 in PREFIX-1
# (198.18.0.0/15 is set aside for benchmarking, RFC 2544), and lo is up.
# `down` deletes both namespaces, and the veth pair with them.
#
#   netns-pair.sh up [PREFIX]     (default PREFIX: rsbp)
#   netns-pair.sh down [PREFIX]
set -euo pipefail

usage() { sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'; }

action=${1:-}
prefix=${2:-rsbp}
[[ "$prefix" =~ ^[A-Za-z0-9_-]{1,20}$ ]] || { echo "netns-pair: bad prefix '$prefix'" >&2; exit 2; }
ns=("$prefix-0" "$prefix-1")
addr=(198.18.0.1/24 198.18.0.2/24)

case "$action" in
  up)
    for n in "${ns[@]}"; do
      if ip netns list | grep -qw -- "$n"; then
        echo "netns-pair: namespace $n exists; run '$0 down $prefix' first" >&2
        exit 1
      fi
    done
    trap '"$0" down "$prefix" >/dev/null 2>&1 || true' ERR
    ip netns add "${ns[0]}"
    ip netns add "${ns[1]}"
    # Both ends are made inside their namespaces, so the name rsb0 collides with
    # nothing outside them.
    ip link add name rsb0 netns "${ns[0]}" type veth peer name rsb0 netns "${ns[1]}"
    for i in 0 1; do
      ip -n "${ns[$i]}" link set lo up
      ip -n "${ns[$i]}" addr add "${addr[$i]}" dev rsb0
      ip -n "${ns[$i]}" link set rsb0 up
    done
    echo "netns-pair: ${ns[0]} (${addr[0]%/*}) <-> ${ns[1]} (${addr[1]%/*}) over rsb0"
    ;;
  down)
    for n in "${ns[@]}"; do
      if ip netns list | grep -qw -- "$n"; then ip netns del "$n"; fi
    done
    echo "netns-pair: ${ns[*]} removed"
    ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
