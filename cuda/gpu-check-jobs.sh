# Steps 5 and 6 of gpu-check.sh (sourced by it, not run on its own): ringsyncd with
# ringsync-cuda-trainer ranks allreducing device memory. Uses gpu-check.sh's say,
# result, limit, fits, children, out and bin.

# scrape HOST:PORT: the /metrics text on stdout (bash's /dev/tcp: no curl needed).
scrape() {
  local host=${1%:*} port=${1##*:}
  exec 3<>"/dev/tcp/$host/$port" || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" >&3
  timeout 5 cat <&3
  exec 3<&-
}

# rank_results NAME DIR CODE...: one summary line per rank (its last line, or why it failed).
rank_results() {
  local name=$1 dir=$2 r=0 code
  shift 2
  for code in "$@"; do
    if ((code == 0)); then
      result "$name rank $r" PASS "$(tail -1 "$dir/rank$r.log")"
    elif ((code == 124)); then
      result "$name rank $r" FAIL "timed out: $(grep -m3 . "$dir/rank$r.log" | tr '\n' ' ')"
    else
      result "$name rank $r" FAIL "(exit $code) $(grep -m3 . "$dir/rank$r.log" | tr '\n' ' ')"
    fi
    r=$((r + 1))
  done
}

# one_node_job NAME WATCH TRAINER-ARGS...: one ringsyncd, 2 ranks on the GPU. WATCH=1
# scrapes /metrics while they run and checks ringsync_gpu_utilization_ratio.
one_node_job() {
  local name=$1 watch=$2
  shift 2
  local dir=$out/$name
  mkdir -p "$dir"
  if ! fits 20; then
    result "$name" FAIL "not run: the --budget is spent"
    return
  fi
  local sock=$dir/ringsyncd.sock ready=$dir/ready
  timeout "$(limit 300)" "$bin/ringsyncd" --socket "$sock" --metrics-address 127.0.0.1:0 \
    --ready-file "$ready" --log-level info >"$dir/daemon.log" 2>&1 &
  local daemon=$!
  children+=("$daemon")
  for _ in $(seq 300); do [[ -s $ready ]] && break; sleep 0.1; done
  if [[ ! -s $ready ]]; then
    result "$name" FAIL "ringsyncd did not become ready: $(tail -3 "$dir/daemon.log" | tr '\n' ' ')"
    kill "$daemon" 2>/dev/null
    return
  fi
  local metrics pids=() r
  metrics=$(sed -n 's/^metrics=//p' "$ready")
  for r in 0 1; do
    RINGSYNC_SOCKET=$sock RINGSYNC_LOCAL_RANK=$r RINGSYNC_LOCAL_SIZE=2 \
      timeout "$(limit 240)" "$bin/ringsync-cuda-trainer" "$@" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
    children+=($!)
  done
  local best=0 samples=0 u
  if ((watch)); then
    # While the trainers run: the highest GPU utilization /metrics reports.
    while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
      if scrape "$metrics" >"$dir/metrics.txt" 2>/dev/null; then
        u=$(awk '/^ringsync_gpu_utilization_ratio\{/ {print $2}' "$dir/metrics.txt" | sort -g | tail -1)
        if [[ -n $u ]]; then
          samples=$((samples + 1))
          best=$(awk -v a="$best" -v b="$u" 'BEGIN {print (b > a) ? b : a}')
        fi
        cp "$dir/metrics.txt" "$dir/metrics-loaded.txt"
      fi
      sleep 1
    done
  fi
  local codes=()
  for r in 0 1; do
    wait "${pids[$r]}"
    codes+=($?)
  done
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  rank_results "$name" "$dir" "${codes[@]}"
  ((watch)) || return
  local nvml
  nvml=$(grep -m1 'no GPU metrics' "$dir/daemon.log")
  if ((samples > 0)) && awk -v b="$best" 'BEGIN {exit !(b > 0)}'; then
    result "$name gpu metrics" PASS "ringsync_gpu_utilization_ratio peaked at $best over $samples scrapes under load"
  elif [[ -n $nvml ]]; then
    result "$name gpu metrics" SKIP "ringsyncd says: ${nvml#*] }"
  elif ((samples == 0)); then
    result "$name gpu metrics" FAIL "no ringsync_gpu_utilization_ratio series on $metrics (see $dir/daemon.log)"
  else
    result "$name gpu metrics" FAIL "ringsync_gpu_utilization_ratio stayed 0 over $samples scrapes under load"
  fi
  grep -E '^ringsync_gpu_' "$dir/metrics-loaded.txt" 2>/dev/null | sed 's/^/    /' | tee -a "$summary"
}

# two_node_job NAME DAEMON-ARGS TRAINER-ARGS...: `ringsync launch` with 2 daemons
# (nodes) x 2 ranks on this machine; the daemons stage device data through host
# memory. DAEMON-ARGS: one word of extra ringsyncd flags, e.g. --gpu-staging-chunk=0.
two_node_job() {
  local name=$1 daemon_args=() a
  for a in $2; do daemon_args+=(--daemon-arg "$a"); done
  shift 2
  local dir=$out/two-nodes-$name
  mkdir -p "$dir"
  if ! fits 30; then
    result "two-nodes $name" FAIL "not run: the --budget is spent"
    return
  fi
  local t
  t=$(limit 240)
  timeout $((t + 15)) "$bin/ringsync" launch --nodes 2 --slots 2 --log-dir "$dir" --timeout "${t}s" "${daemon_args[@]}" \
    -- "$bin/ringsync-cuda-trainer" "$@" >"$dir/out.log" 2>"$dir/err.log" &
  local launcher=$!
  children+=("$launcher")
  wait "$launcher"
  local rc=$? r codes=()
  # Each rank's lines, as the launcher prefixed them, into rankR.log.
  for r in 0 1 2 3; do
    grep -h "^\[rank $r\] " "$dir/out.log" "$dir/err.log" | sed "s/^\[rank $r\] //" >"$dir/rank$r.log"
    if grep -q 'verified' "$dir/rank$r.log"; then codes+=(0); else codes+=($((rc == 0 ? 1 : rc))); fi
  done
  rank_results "two-nodes $name" "$dir" "${codes[@]}"
  if ((rc != 0)); then
    result "two-nodes $name" FAIL "ringsync launch exited $rc: $(grep -v '^\[rank' "$dir/err.log" | tail -3 | tr '\n' ' ')"
  fi
}
