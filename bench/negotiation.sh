#!/usr/bin/env bash
# Negotiation latency with and without the response cache, on one machine.
#
#   bench/negotiation.sh [BUILD_DIR] [--steps N] [--tensors T] [--bytes B] [--warmup W]
#                        [--cycle-times "1ms 0"] [--caches "0 1024"] [--repeat R]
#
# For every response-cache size and cycle time (and --repeat times each), starts a
# job of 2 ringsyncd nodes on loopback (each its own control port, socket and
# metrics port, in a temp dir) with 2 negotiation-bench ranks per node, then
# scrapes both daemons' /metrics and stops everything. Prints one markdown table.
# BUILD_DIR (default: build) must hold bin/ringsyncd and bin/negotiation-bench.
# Every wait is bounded: a run that hangs is killed and reported, never waited on.
set -euo pipefail

build_dir=build
steps=200
tensors=16
bytes=32
warmup=20
cycle_times="1ms 0"
caches="0 1024"
repeat=1
local_size=2  # ranks per node; 2 nodes

usage() { sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --tensors) tensors=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --cycle-times) cycle_times=$2; shift 2 ;;
    --caches) caches=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "negotiation.sh: unknown option $1" >&2; usage ;;
    *) build_dir=$1; shift ;;
  esac
done

daemon_bin=$build_dir/bin/ringsyncd
bench_bin=$build_dir/bin/negotiation-bench
for b in "$daemon_bin" "$bench_bin"; do
  if [ ! -x "$b" ]; then
    echo "negotiation.sh: $b not found; build it (cmake --build $build_dir --target ringsyncd negotiation-bench)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-negotiation.XXXXXX")
pids=()  # every process this script started that may still run

stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # Up to 10 s for a clean exit, then SIGKILL what is left.
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# A loopback port that no socket uses now (in any state) and that `taken` does not
# hold, below the kernel's ephemeral range so that outgoing connections do not take
# it meanwhile. Another process can still take it before the daemon binds:
# start_job then tries again with other ports.
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
free_port() {
  local taken=$1 port low=10000 span=$((ephemeral_low - 10000))
  [ "$span" -lt 1000 ] && { low=20000; span=40000; }
  for _ in $(seq 200); do
    port=$((low + (RANDOM * 32768 + RANDOM) % span))
    case " $taken " in *" $port "*) continue ;; esac
    if [ -z "$(ss -Htan "sport = :$port" 2>/dev/null)" ]; then echo "$port"; return; fi
  done
  echo "negotiation.sh: no free loopback port found" >&2
  return 1
}

# Waits (30 s at most) for a daemon's ready file and prints its metrics host:port.
wait_ready() {
  local ready=$1 pid=$2 log=$3
  for _ in $(seq 300); do
    if [ -f "$ready" ] && grep -q '^metrics=' "$ready"; then
      sed -n 's/^metrics=//p' "$ready"
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "negotiation.sh: ringsyncd exited during start-up; its log:" >&2
      tail -n 30 "$log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "negotiation.sh: ringsyncd did not get ready in 30 s; its log:" >&2
  tail -n 30 "$log" >&2
  return 1
}

# The sum over every series of one metric (labels or none) in /metrics text; 0 if absent.
metric() {
  awk -v name="$2" '
    { split($1, key, "{") }
    key[1] == name { sum += $2; found = 1 }
    END { printf "%.9g\n", found ? sum : 0 }' "$1"
}

# mean = sum / count of a histogram, in microseconds; "-" when it counted nothing.
mean_us() {
  local sum count
  sum=$(metric "$1" "$2_sum")
  count=$(metric "$1" "$2_count")
  awk -v s="$sum" -v c="$count" 'BEGIN { if (c > 0) printf "%.0f", s / c * 1e6; else print "-" }'
}

# The value of KEY in a "RESULT key=value ..." line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# Starts the 2 daemons of one job and waits until both are ready; sets `metrics_at`
# to their metrics host:port. Returns 1 (with their logs on stderr) when one fails.
start_job() {
  local dir=$1 job=$2 cache=$3 cycle=$4
  local port0 port1
  port0=$(free_port "")
  port1=$(free_port "$port0")
  printf '127.0.0.1:%s slots=%s\n127.0.0.1:%s slots=%s\n' \
    "$port0" "$local_size" "$port1" "$local_size" >"$dir/hostfile"

  local node port daemon_pids=()
  for node in 0 1; do
    port=$port0
    [ "$node" -eq 1 ] && port=$port1
    "$daemon_bin" --socket "$dir/node$node.sock" --metrics-address 127.0.0.1:0 \
      --ready-file "$dir/node$node.ready" --log-level warn --ucx-transports tcp,self \
      --hostfile "$dir/hostfile" --node-rank "$node" --control-address "127.0.0.1:$port" \
      --job-id "$job" --job-token "token-$$" \
      --cycle-time "$cycle" --response-cache "$cache" >"$dir/node$node.log" 2>&1 &
    daemon_pids+=($!)
    pids+=($!)
  done
  local at
  metrics_at=()
  for node in 0 1; do
    at=$(wait_ready "$dir/node$node.ready" "${daemon_pids[$node]}" "$dir/node$node.log") || return 1
    metrics_at+=("$at")
  done
}

# One job: 2 nodes x local_size ranks. Sets `row` to its table row. Not to be run
# in a subshell: `pids` must stay visible to the traps.
run_one() {
  local cache=$1 cycle=$2 run=$3
  local dir=$work/cache$cache-cycle$cycle-run$run
  mkdir -p "$dir"
  local job=negotiation-bench-$$-$run
  local attempt
  for attempt in 1 2 3; do
    start_job "$dir" "$job" "$cache" "$cycle" && break
    # A port taken between free_port and the daemon's bind: try other ports.
    local in_use=0
    grep -qs 'Address already in use' "$dir"/node*.log && in_use=1
    stop_all
    if [ $in_use -eq 0 ] || [ "$attempt" -eq 3 ]; then return 1; fi
    echo "negotiation.sh: a control port was taken meanwhile; trying other ports" >&2
    rm -f "$dir"/node*
  done

  local rank_pids=() local_rank node
  for node in 0 1; do
    for local_rank in $(seq 0 $((local_size - 1))); do
      # timeout bounds a hung job; the bench's own --timeout-ms usually reports first.
      RINGSYNC_SOCKET=$dir/node$node.sock RINGSYNC_JOB_ID=$job \
        RINGSYNC_LOCAL_RANK=$local_rank RINGSYNC_LOCAL_SIZE=$local_size \
        timeout -k 5 120 "$bench_bin" --steps "$steps" --tensors "$tensors" --bytes "$bytes" \
        --warmup "$warmup" --timeout-ms 30000 \
        >"$dir/rank$node.$local_rank.out" 2>&1 &
      rank_pids+=($!)
      pids+=($!)
    done
  done
  local failed=0 pid i=0
  for pid in "${rank_pids[@]}"; do
    if ! wait "$pid"; then
      echo "negotiation.sh: rank $i (cache $cache, cycle $cycle) failed:" >&2
      cat "$dir/rank$((i / local_size)).$((i % local_size)).out" >&2
      failed=1
    fi
    i=$((i + 1))
  done
  if [ $failed -ne 0 ]; then
    for node in 0 1; do
      echo "--- ringsyncd node $node log (last 30 lines)" >&2
      tail -n 30 "$dir/node$node.log" >&2
    done
    return 1
  fi

  for node in 0 1; do
    curl -sf --max-time 5 "http://${metrics_at[$node]}/metrics" >"$dir/node$node.metrics" || {
      echo "negotiation.sh: cannot read node $node's metrics at ${metrics_at[$node]}" >&2
      return 1
    }
  done
  stop_all

  local result median per_tensor
  result=$(grep '^RESULT ' "$dir/rank0.0.out") || {
    echo "negotiation.sh: rank 0 printed no RESULT line" >&2
    return 1
  }
  median=$(field "$result" median_step_s)
  per_tensor=$(field "$result" per_tensor_s)
  local m0=$dir/node0.metrics m1=$dir/node1.metrics
  local hits misses ops fused
  hits=$(awk -v a="$(metric "$m0" ringsync_response_cache_hits_total)" \
             -v b="$(metric "$m1" ringsync_response_cache_hits_total)" 'BEGIN { print a + b }')
  misses=$(awk -v a="$(metric "$m0" ringsync_response_cache_misses_total)" \
               -v b="$(metric "$m1" ringsync_response_cache_misses_total)" 'BEGIN { print a + b }')
  ops=$(metric "$m0" ringsync_ring_operations_total)
  fused=$(metric "$m0" ringsync_fused_tensors_total)
  row=$(awk -v cache="$cache" -v cycle="$cycle" -v med="$median" -v per="$per_tensor" \
      -v n1="$(mean_us "$m1" ringsync_negotiation_seconds)" \
      -v n0="$(mean_us "$m0" ringsync_negotiation_seconds)" \
      -v hits="$hits" -v misses="$misses" -v ops="$ops" -v fused="$fused" 'BEGIN {
    printf "| %s | %s | %.3f | %.1f | %s | %s | %s / %s | %s | %.1f |\n",
      cache, cycle, med * 1e3, per * 1e6, n1, n0, hits, misses, ops,
      (ops > 0 ? fused / ops : 0)  # parenthesised: a bare > would redirect
  }')
}

echo "2 nodes x $local_size ranks on loopback; $tensors allreduces of $bytes B per step," \
  "$steps steps after $warmup warm-up (the metrics also count the warm-up and one start barrier)"
echo
echo "| cache | cycle time | median step (ms) | per tensor (us) | mean negotiation node 1 (us) | mean negotiation node 0 (us) | cache hits / misses | ring ops | tensors per op |"
echo "|---|---|---|---|---|---|---|---|---|"
# Repeats go outermost, so every setting sees the same drift in the machine's load;
# the rows are printed grouped by setting once all runs are done.
declare -A rows
row=
metrics_at=()
for run in $(seq "$repeat"); do
  for cache in $caches; do
    for cycle in $cycle_times; do
      echo "negotiation.sh: run $run of $repeat, --response-cache $cache --cycle-time $cycle" >&2
      run_one "$cache" "$cycle" "$run"
      rows[$cache/$cycle]+=$row$'\n'
    done
  done
done
for cache in $caches; do
  for cycle in $cycle_times; do
    printf '%s' "${rows[$cache/$cycle]}"
  done
done
