#!/usr/bin/env bash
# Daemon footprint: CPU of idle daemons, and resident memory over many collectives.
#
#   bench/memory.sh [BUILD_DIR] [--idle-seconds S] [--iters N]
#
# 1. Idle: `ringsync launch --nodes 2 --slots 1 -- sleep S+3` (the ring forms, the
#    heartbeats run, no collective); the daemons' CPU time (utime + stime from
#    /proc) over the last S-5 seconds, as a share of one core.
# 2. Load: `ringsync launch --nodes 2 --slots 2 -- ringsync-bench` sweeping 18
#    sizes (8 B to 1 MiB, factor 2) once for each of 4 data types, N timed + 5
#    warm-up iterations each (default N 140: 10,440 allreduces), every element
#    checked; both daemons' private resident memory (RssAnon: VmRSS would also
#    count the trainers' shared buffers the daemon maps) sampled every 0.25 s and shown a quarter, half,
#    three quarters of the way and at the end: flat means no growth after the
#    first sweep.
# BUILD_DIR (default: build) holds bin/ringsync, bin/ringsyncd, bin/ringsync-bench.
# Every run is bounded by `ringsync launch --timeout`.
set -euo pipefail

build_dir=build
idle_seconds=25
iters=140
while [ $# -gt 0 ]; do
  case "$1" in
    --idle-seconds) idle_seconds=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "memory.sh: unknown option $1" >&2; exit 2 ;;
    *) build_dir=$1; shift ;;
  esac
done
bin=$build_dir/bin
for b in ringsync ringsyncd ringsync-bench; do
  [ -x "$bin/$b" ] || { echo "memory.sh: $bin/$b not found (build first)" >&2; exit 2; }
done
[ "$idle_seconds" -gt 5 ] || { echo "memory.sh: --idle-seconds must be above 5" >&2; exit 2; }

ticks_per_second=$(getconf CLK_TCK)
# The ringsyncd children of a launcher, once both are up (bounded wait).
daemons_of() {
  local pids=""
  for _ in $(seq 200); do
    pids=$(pgrep -P "$1" -x ringsyncd | tr '\n' ' ' || true)
    [ "$(wc -w <<<"$pids")" -ge 2 ] && break
    sleep 0.05
  done
  echo "$pids"
}
cpu_ticks() {  # utime + stime of the given pids
  local total=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    # Fields after the command name (which may hold spaces): utime is the 12th.
    local f
    read -r -a f <<<"$(sed 's/^.*) //' "/proc/$p/stat")"
    total=$((total + ${f[11]} + ${f[12]}))
  done
  echo "$total"
}
rss_kib() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

echo "# ringsyncd footprint ($(nproc) CPUs, $(uname -r))"
echo
"$bin/ringsync" launch --nodes 2 --slots 1 --timeout $((idle_seconds + 30))s -- sleep $((idle_seconds + 3)) \
  >/dev/null 2>&1 &
launcher=$!
read -r -a idle_pids <<<"$(daemons_of $launcher)"
sleep 5
before=$(cpu_ticks "${idle_pids[@]}")
sleep $((idle_seconds - 5))
after=$(cpu_ticks "${idle_pids[@]}")
[ -n "${RINGSYNC_BENCH_DEBUG:-}" ] && echo "pids ${idle_pids[*]} ticks $before -> $after" >&2
wait $launcher || true
window=$((idle_seconds - 5))
awk -v t=$((after - before)) -v hz="$ticks_per_second" -v s="$window" -v n="${#idle_pids[@]}" \
  'BEGIN { printf "Idle: %d daemons used %.0f ms of CPU in %d s: %.2f %% of one core each\n\n",
           n, 1000 * t / hz, s, 100 * t / hz / s / n }'

samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
# One bench process per rank (a rank that reconnects meets its job shutting
# down), sweeping the sizes once per data type: four sweeps of equal bytes.
"$bin/ringsync" launch --nodes 2 --slots 2 --timeout 30m -- \
  "$bin/ringsync-bench" -b 8 -e 1M -f 2 -d float,double,int32,int64 -n "$iters" -w 5 \
  >/dev/null 2>&1 &
launcher=$!
read -r -a load_pids <<<"$(daemons_of $launcher)"
while kill -0 $launcher 2>/dev/null; do
  echo "$(rss_kib "${load_pids[0]}") $(rss_kib "${load_pids[1]}")" >>"$samples"
  sleep 0.25
done
status=0
wait $launcher || status=$?
echo "Load: 4 data types x 18 sizes (8 B to 1 MiB) x $((iters + 5)) = $((4 * 18 * (iters + 5))) allreduces, 2 nodes x 2 ranks, exit status $status"
echo
awk 'NF == 2 && $1 > 0 && $2 > 0 { a[++n] = $1; b[n] = $2; if ($1 > ma) ma = $1; if ($2 > mb) mb = $2 }
     END {
       if (n < 4) { print "too few samples"; exit 1 }
       printf "| daemon private RSS (MiB) | 1/4 | 2/4 | 3/4 | end | max |\n|---|---:|---:|---:|---:|---:|\n"
       printf "| node 0 | %.1f | %.1f | %.1f | %.1f | %.1f |\n", a[int(n/4)]/1024, a[int(n/2)]/1024, a[int(3*n/4)]/1024, a[n]/1024, ma/1024
       printf "| node 1 | %.1f | %.1f | %.1f | %.1f | %.1f |\n", b[int(n/4)]/1024, b[int(n/2)]/1024, b[int(3*n/4)]/1024, b[n]/1024, mb/1024
       printf "\n(%d samples; the columns are RSS a quarter, half, three quarters of the way through and at the end)\n", n
     }' "$samples"
exit $status
