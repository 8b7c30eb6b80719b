#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU (an H200 here) and no package
# registry, in a few minutes and with a time limit on every step:
#  1. nvidia-smi: which GPU and driver;
#  2. ringsync-cuda-check: every device kernel against the CPU reference on random
#     data with special values (exit 77 there means: no usable CUDA device);
#  3. ringsync-cuda-bench: 2-input f32 sum vs device-to-device copy (target >= 85%),
#     staging pipeline vs pinned cudaMemcpy (target >= 80%);
#  4. ringsyncd with 2 ringsync-cuda-trainer ranks on the GPU allreducing device memory:
#     f32 sum under load (every result checked by the trainers, /metrics scraped
#     meanwhile for a non-zero ringsync_gpu_utilization_ratio), then bf16 avg and
#     f16 max;
#  5. a summary, also in OUT/summary.txt, with the logs beside it.
#
# usage: gpu-check.sh [BUNDLE] [--quick] [--out DIR] [--budget SECONDS]
#   BUNDLE  a folder with bin/ and lib/: what cuda/gpu-bundle.sh makes, or a build
#           directory. Default: the folder above this script's (inside a bundle).
#   --quick smaller kernel check and benchmark (about a minute in all)
#   --out   where logs and the summary go (default: a new temporary folder)
#   --budget the whole check's time limit in seconds (default 480; every step's own
#           limit is cut to what is left, and steps that no longer fit are skipped
#           and reported as failed)
# Exit: 0 when everything passed, 1 when something failed, 77 without a CUDA device.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle="" quick="" out="" budget=480
while (($#)); do
  case $1 in
    --quick) quick=--quick ;;
    --out) out=$2; shift ;;
    --budget) budget=$2; shift ;;
    -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bundle=$1 ;;
  esac
  shift
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-check: --budget takes whole seconds, not '$budget'" >&2; exit 2; }
bundle=$(cd "${bundle:-$here/..}" && pwd) || exit 1
bin=$bundle/bin
for p in ringsyncd ringsync-cuda-check ringsync-cuda-bench ringsync-cuda-trainer; do
  [[ -x $bin/$p ]] || { echo "gpu-check: $bin/$p is missing (see cuda/gpu-bundle.sh)" >&2; exit 1; }
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/ringsync-gpu-check.XXXXXX")}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d $bundle/lib/ucx ]] && export UCX_MODULE_DIR="$bundle/lib/ucx"
export UCX_WARN_UNUSED_ENV_VARS=n

deadline=$((SECONDS + budget))
# limit N: N seconds, or what is left of the budget when that is less (at least 1).
limit() {
  local left=$((deadline - SECONDS))
  ((left < 1)) && left=1
  echo $(($1 < left ? $1 : left))
}
# fits N: true when at least N seconds of the budget are left.
fits() { (((deadline - SECONDS) >= $1)); }

summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
failed=0
no_device=0

# ---- 1. the machine ----
say "# ringsync GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
[[ -f $bundle/PROVENANCE ]] && sed 's/^/  /' "$bundle/PROVENANCE" | tee -a "$summary"
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>&1 | sed 's/^/  gpu: /' | tee -a "$summary"
else
  say "  nvidia-smi: not found"
fi

# ---- 2. kernels against the CPU reference ----
say ""
say "## kernels vs CPU reference (ringsync-cuda-check $quick)"
timeout "$(limit 600)" "$bin/ringsync-cuda-check" $quick >"$out/check.log" 2>&1
rc=$?
cat "$out/check.log"
case $rc in
  0) say "  PASS: $(tail -1 "$out/check.log")" ;;
  77) say "  SKIP: $(head -1 "$out/check.log")"; no_device=1 ;;
  124) say "  FAIL: timed out"; failed=1 ;;
  *) say "  FAIL (exit $rc): $(grep -m1 -E 'MISMATCH|error|:' "$out/check.log")"; failed=1 ;;
esac

# ---- 3. bandwidth ----
if ((!no_device)) && ! fits 30; then
  say ""
  say "## bandwidth: FAIL: skipped, the --budget of $budget s is spent"
  failed=1
elif ((!no_device)); then
  say ""
  say "## bandwidth (ringsync-cuda-bench $quick)"
  timeout "$(limit 300)" "$bin/ringsync-cuda-bench" $quick >"$out/bench.log" 2>&1
  rc=$?
  grep -E '^(kernel|staging)' "$out/bench.log" | sed 's/^/  /' | tee -a "$summary"
  if ((rc != 0)); then
    say "  FAIL (exit $rc): $(tail -1 "$out/bench.log")"
    failed=1
  elif grep -q 'BELOW TARGET' "$out/bench.log"; then
    say "  below target (see above): reported, not a failure of the check"
  fi
fi

# ---- 4. a daemon and two trainers on the GPU ----
scrape() {  # host:port -> the /metrics text on stdout (bash's /dev/tcp: no curl needed)
  local host=${1%:*} port=${1##*:}
  exec 3<>"/dev/tcp/$host/$port" || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" >&3
  timeout 5 cat <&3
  exec 3<&-
}

# run_job NAME SCRAPE TRAINER-ARGS...: one daemon, 2 ranks; returns non-zero on failure.
run_job() {
  local name=$1 watch=$2
  shift 2
  local dir=$out/$name
  mkdir -p "$dir"
  if ! fits 20; then
    say "  $name: FAIL: skipped, the --budget of $budget s is spent"
    return 1
  fi
  local sock=$dir/ringsyncd.sock ready=$dir/ready
  timeout "$(limit 300)" "$bin/ringsyncd" --socket "$sock" --metrics-address 127.0.0.1:0 \
    --ready-file "$ready" --log-level info >"$dir/daemon.log" 2>&1 &
  local daemon=$!
  trap 'kill '"$daemon"' 2>/dev/null' EXIT  # a check that is itself killed leaves no daemon
  for _ in $(seq 300); do [[ -s $ready ]] && break; sleep 0.1; done
  if [[ ! -s $ready ]]; then
    say "  $name: FAIL: ringsyncd did not become ready (log: $dir/daemon.log)"
    tail -5 "$dir/daemon.log"
    kill "$daemon" 2>/dev/null
    return 1
  fi
  local metrics
  metrics=$(sed -n 's/^metrics=//p' "$ready")
  local pids=() r
  for r in 0 1; do
    RINGSYNC_SOCKET=$sock RINGSYNC_LOCAL_RANK=$r RINGSYNC_LOCAL_SIZE=2 \
      timeout "$(limit 240)" "$bin/ringsync-cuda-trainer" "$@" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  local best=0 samples=0
  if ((watch)); then
    # While the trainers run: the highest GPU utilization /metrics reports.
    while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
      if scrape "$metrics" >"$dir/metrics.txt" 2>/dev/null; then
        local u
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
  local rcs=() status=0
  for r in 0 1; do
    wait "${pids[$r]}"
    rcs+=($?)
  done
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  for r in 0 1; do
    if ((rcs[r] == 0)); then
      say "  $name rank $r: $(tail -1 "$dir/rank$r.log")"
    elif ((rcs[r] == 77)); then
      say "  $name rank $r: SKIP: $(tail -1 "$dir/rank$r.log")"
    else
      say "  $name rank $r: FAIL (exit ${rcs[r]}): $(grep -m3 . "$dir/rank$r.log" | tr '\n' ' ')"
      status=1
    fi
  done
  if ((watch && rcs[0] != 77)); then
    if ((samples == 0)); then
      say "  $name: FAIL: no ringsync_gpu_utilization_ratio series on $metrics (is NVML there, and is the sampler started in ringsyncd? see $dir/daemon.log)"
      status=1
    elif awk -v b="$best" 'BEGIN {exit !(b > 0)}'; then
      say "  $name: ringsync_gpu_utilization_ratio peaked at $best over $samples scrapes under load"
    else
      say "  $name: FAIL: ringsync_gpu_utilization_ratio stayed 0 over $samples scrapes under load"
      status=1
    fi
    grep -E '^ringsync_gpu_' "$dir/metrics-loaded.txt" 2>/dev/null | sed 's/^/    /' | tee -a "$summary"
  fi
  return $status
}

say ""
say "## ringsyncd + 2 trainers allreducing device memory"
run_job f32-sum-load 1 --dtype f32 --op sum --count 16777216 --iterations 100 --busy-ms 40 || failed=1
run_job bf16-avg 0 --dtype bf16 --op avg --count 1000003 --iterations 5 --busy-ms 0 || failed=1
run_job f16-max 0 --dtype f16 --op max --count 4099 --iterations 5 --busy-ms 0 || failed=1

say ""
if ((failed)); then
  say "RESULT: FAIL (logs in $out)"
  exit 1
elif ((no_device)); then
  say "RESULT: SKIPPED, no CUDA device (logs in $out)"
  exit 77
fi
say "RESULT: PASS (logs in $out)"
exit 0
