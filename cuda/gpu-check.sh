#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU (an H200 here) and no package
# registry, in a few minutes and with a time limit on every step. Each step reports
# PASS, FAIL or SKIP with the reason, and the summary is written whatever happens
# (also when a step hangs or the check itself is killed):
#  1. machine: nvidia-smi (which GPU and driver), the kernel;
#  2. ipc: can a second process map this one's device memory (CUDA IPC), as a
#     trainer and its ringsyncd must? Sandboxed GPU runtimes may refuse it: then the
#     daemon steps are skipped, not failed;
#  3. kernels: ringsync-cuda-check, every device kernel against the CPU reference;
#  4. bandwidth: ringsync-cuda-bench, 2-input f32 sum vs device-to-device copy
#     (target >= 85%), staging pipeline vs pinned cudaMemcpy (target >= 80%);
#  5. one node: ringsyncd with 2 ringsync-cuda-trainer ranks on the GPU allreducing
#     device memory (f32 sum under load, /metrics scraped meanwhile for a non-zero
#     ringsync_gpu_utilization_ratio; then bf16 avg and f16 max), every result checked;
#  6. two nodes: `ringsync launch --nodes 2 --slots 2` on this machine, so each
#     daemon stages its node's device data through host memory for the ring.
#
# usage: gpu-check.sh [BUNDLE] [--quick] [--out DIR] [--budget SECONDS]
#   BUNDLE  a folder with bin/ and lib/: what cuda/gpu-bundle.sh makes, or a build
#           directory. Default: the folder above this script's (inside a bundle).
#   --quick smaller kernel check and benchmark (about a minute in all)
#   --out   where logs and summary.txt go (default: a new temporary folder)
#   --budget the whole check's time limit in seconds (default 480; every step's own
#           limit is cut to what is left; a step that no longer fits is a FAIL)
# Exit: 0 when nothing failed, 1 when something failed, 77 without a CUDA device.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle="" quick="" out="" budget=480
while (($#)); do
  case $1 in
    --quick) quick=--quick ;;
    --out) out=$2; shift ;;
    --budget) budget=$2; shift ;;
    -h | --help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bundle=$1 ;;
  esac
  shift
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-check: --budget takes whole seconds, not '$budget'" >&2; exit 2; }
bundle=$(cd "${bundle:-$here/..}" && pwd) || exit 1
bin=$bundle/bin
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/ringsync-gpu-check.XXXXXX")}
mkdir -p "$out" || exit 1
summary=$out/summary.txt
: >"$summary"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d $bundle/lib/ucx ]] && export UCX_MODULE_DIR="$bundle/lib/ucx"
export UCX_WARN_UNUSED_ENV_VARS=n

say() { echo "$*" | tee -a "$summary"; }
passed=0 failed=0 skipped=0 step="start" finished=0 no_device=0
# result STEP PASS|FAIL|SKIP REASON...: one line of the summary per outcome.
result() {
  local name=$1 verdict=$2
  shift 2
  case $verdict in
    PASS) passed=$((passed + 1)) ;;
    FAIL) failed=$((failed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
  esac
  say "  $verdict $name: $*"
}
children=()
# Whatever ends the script, the summary gets its last line and no process stays behind.
on_exit() {
  local pid
  for pid in "${children[@]}"; do kill "$pid" 2>/dev/null; done
  ((finished)) || say "RESULT: INCOMPLETE: the check stopped during step '$step' ($passed passed, $failed failed, $skipped skipped; logs in $out)"
}
trap on_exit EXIT
trap 'exit 143' TERM INT

deadline=$((SECONDS + budget))
limit() {  # limit N: N seconds, or what is left of the budget when that is less (>= 1)
  local left=$((deadline - SECONDS))
  ((left < 1)) && left=1
  echo $(($1 < left ? $1 : left))
}
fits() { (((deadline - SECONDS) >= $1)); }
# bounded N LOG CMD...: runs CMD for at most `limit N` seconds, output in LOG; its exit
# status (124: cut). In the background, so that a signal to the check is handled at
# once (bash runs traps only between foreground commands).
bounded() {
  local seconds=$1 log=$2 pid
  shift 2
  timeout "$(limit "$seconds")" "$@" >"$log" 2>&1 &
  pid=$!
  children+=("$pid")
  wait "$pid"
}

# ---- 1. the machine ----
step=machine
say "# ringsync GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), kernel $(uname -r)"
[[ -f $bundle/PROVENANCE ]] && sed 's/^/  /' "$bundle/PROVENANCE" | tee -a "$summary"
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>&1 | sed 's/^/  gpu: /' | tee -a "$summary"
else
  say "  nvidia-smi: not found"
fi
for p in ringsyncd ringsync ringsync-cuda-check ringsync-cuda-bench ringsync-cuda-trainer ringsync-cuda-ipc-probe; do
  [[ -x $bin/$p ]] || { result bundle FAIL "$bin/$p is missing (see cuda/gpu-bundle.sh)"; exit 1; }
done

# ---- 2. CUDA IPC between processes ----
step=ipc
say ""
say "## CUDA IPC between two processes (ringsync-cuda-ipc-probe)"
bounded 60 "$out/ipc.log" "$bin/ringsync-cuda-ipc-probe"
rc=$?
ipc_ok=0 ipc_why=""
case $rc in
  0) result ipc PASS "$(tail -1 "$out/ipc.log")"; ipc_ok=1 ;;
  77) ipc_why=$(tail -1 "$out/ipc.log"); result ipc SKIP "${ipc_why#SKIP: }"
      grep -q 'no usable CUDA device' "$out/ipc.log" && no_device=1 ;;
  124) result ipc FAIL "timed out"; ipc_why="the IPC probe timed out" ;;
  *) ipc_why=$(tail -1 "$out/ipc.log"); result ipc FAIL "(exit $rc) $ipc_why" ;;
esac

# ---- 3. kernels against the CPU reference ----
step=kernels
say ""
say "## kernels vs CPU reference (ringsync-cuda-check $quick)"
bounded 600 "$out/check.log" "$bin/ringsync-cuda-check" $quick
rc=$?
cat "$out/check.log"
case $rc in
  0) result kernels PASS "$(tail -1 "$out/check.log")" ;;
  77) result kernels SKIP "$(head -1 "$out/check.log")"; no_device=1 ;;
  124) result kernels FAIL "timed out" ;;
  *) result kernels FAIL "(exit $rc) $(grep -m1 -E 'MISMATCH|error|:' "$out/check.log")" ;;
esac

# ---- 4. bandwidth ----
step=bandwidth
say ""
say "## bandwidth (ringsync-cuda-bench $quick)"
if ((no_device)); then
  result bandwidth SKIP "no CUDA device"
elif ! fits 30; then
  result bandwidth FAIL "not run: the --budget of $budget s is spent"
else
  bounded 300 "$out/bench.log" "$bin/ringsync-cuda-bench" $quick
  rc=$?
  grep -E '^(device|kernel|staging)' "$out/bench.log" | sed 's/^/  /' | tee -a "$summary"
  if ((rc != 0)); then
    result bandwidth FAIL "(exit $rc) $(tail -1 "$out/bench.log")"
  elif grep -q 'BELOW TARGET' "$out/bench.log"; then
    result bandwidth PASS "measured; some figures are below their target (above)"
  else
    result bandwidth PASS "measured; every figure at or above its target"
  fi
fi

# ---- 5 and 6: ringsyncd with trainers allreducing device memory ----
# shellcheck source=gpu-check-jobs.sh
source "$here/gpu-check-jobs.sh"

step=one-node
say ""
say "## one node: ringsyncd + 2 trainers allreducing device memory"
if ((no_device)); then
  result one-node SKIP "no CUDA device"
elif ((!ipc_ok)); then
  result one-node SKIP "trainers hand device memory to ringsyncd through CUDA IPC: $ipc_why"
else
  one_node_job f32-sum-load 1 --dtype f32 --op sum --count 16777216 --iterations 100 --busy-ms 40
  one_node_job bf16-avg 0 --dtype bf16 --op avg --count 1000003 --iterations 5 --busy-ms 0
  one_node_job f16-max 0 --dtype f16 --op max --count 4099 --iterations 5 --busy-ms 0
fi

step=two-nodes
say ""
say "## two nodes on this machine (tcp between the daemons): device data staged through host memory"
if ((no_device)); then
  result two-nodes SKIP "no CUDA device"
elif ((!ipc_ok)); then
  result two-nodes SKIP "trainers hand device memory to ringsyncd through CUDA IPC: $ipc_why"
else
  # 64 MiB staged chunk by chunk while the ring runs, then whole before and after it.
  two_node_job f32-sum "" --dtype f32 --op sum --count 16777216 --iterations 20 --busy-ms 0
  two_node_job f32-sum-whole --gpu-staging-chunk=0 --dtype f32 --op sum --count 16777216 --iterations 20 --busy-ms 0
  two_node_job bf16-avg "" --dtype bf16 --op avg --count 1000003 --iterations 5 --busy-ms 0
  two_node_job f16-max "" --dtype f16 --op max --count 4099 --iterations 5 --busy-ms 0
fi

step=end
say ""
finished=1
if ((failed)); then
  say "RESULT: FAIL: $passed passed, $failed failed, $skipped skipped (logs in $out)"
  exit 1
elif ((no_device)); then
  say "RESULT: SKIPPED, no CUDA device: $passed passed, $skipped skipped (logs in $out)"
  exit 77
fi
say "RESULT: PASS: $passed passed, $skipped skipped (logs in $out)"
exit 0
