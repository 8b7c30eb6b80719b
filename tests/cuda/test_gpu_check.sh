#!/usr/bin/env bash
# cuda/gpu-check.sh keeps its promise on any machine: every step says PASS, FAIL or
# SKIP with a reason, and summary.txt ends with a RESULT line whatever happens.
#  1. on this machine's build (no GPU here: every device step SKIPs, exit 77; with a
#     GPU the steps run for real and the exit is 0 or 1);
#  2. a kernel check that hangs: cut at the --budget, a FAIL, exit 1;
#  3. the check itself killed mid-step: the summary still says it stopped, and where.
# usage: test_gpu_check.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
script=$src/cuda/gpu-check.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-gpu-check-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; [[ -f $2 ]] && sed 's/^/  | /' "$2"; exit 1; }

# ---- 1. this machine ----
"$script" "$build" --quick --out "$work/real" --budget 300 >"$work/real.log" 2>&1
rc=$?
summary=$work/real/summary.txt
[[ -f $summary ]] || fail "no summary.txt (exit $rc)" "$work/real.log"
for step in ipc kernels bandwidth one-node two-nodes; do
  grep -qE "^  (PASS|FAIL|SKIP) $step" "$summary" || fail "no verdict for step '$step'" "$summary"
done
grep -qE '^RESULT: (PASS|FAIL|SKIPPED)' "$summary" || fail "no RESULT line" "$summary"
if grep -q '^RESULT: SKIPPED' "$summary"; then
  ((rc == 77)) || fail "skipped, but exit $rc instead of 77" "$summary"
  grep -qE '^  SKIP kernels: .+' "$summary" || fail "a skipped step without its reason" "$summary"
fi
echo "this machine: exit $rc, $(tail -1 "$summary")"

# A bundle whose programs are this build's, but for one that `broken` replaces.
fake_bundle() {  # fake_bundle DIR PROGRAM SCRIPT-BODY
  mkdir -p "$1/bin"
  ln -s "$build/lib" "$1/lib"
  local p
  for p in ringsyncd ringsync ringsync-cuda-check ringsync-cuda-bench ringsync-cuda-trainer ringsync-cuda-ipc-probe; do
    ln -s "$build/bin/$p" "$1/bin/$p"
  done
  rm "$1/bin/$2"
  printf '#!/usr/bin/env bash\n%s\n' "$3" >"$1/bin/$2"
  chmod +x "$1/bin/$2"
}

# ---- 2. a step that hangs is cut at the budget ----
fake_bundle "$work/hang" ringsync-cuda-check 'echo "device 0: pretend"; exec sleep 600'
"$script" "$work/hang" --out "$work/hang-out" --budget 5 >/dev/null 2>&1
rc=$?
summary=$work/hang-out/summary.txt
((rc == 1)) || fail "a hanging kernel check gave exit $rc, not 1" "$summary"
grep -q '^  FAIL kernels: timed out' "$summary" || fail "the hang is not reported as a timeout" "$summary"
grep -q '^RESULT: FAIL' "$summary" || fail "no RESULT: FAIL line" "$summary"
echo "hanging step: $(grep 'kernels:' "$summary" | head -1)"

# ---- 3. the check killed mid-step ----
fake_bundle "$work/kill" ringsync-cuda-check 'echo started >"$(dirname "$0")/../started"; exec sleep 600'
"$script" "$work/kill" --out "$work/kill-out" --budget 300 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 300); do [[ -f $work/kill/started ]] && break; sleep 0.1; done
[[ -f $work/kill/started ]] || fail "the pretend kernel check never started" "$work/kill-out/summary.txt"
kill -TERM "$pid"
wait "$pid"
summary=$work/kill-out/summary.txt
grep -q "^RESULT: INCOMPLETE: the check stopped during step 'kernels'" "$summary" ||
  fail "a killed check left no INCOMPLETE line" "$summary"
echo "killed check: $(tail -1 "$summary")"
echo "PASS"
