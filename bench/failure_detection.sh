#!/usr/bin/env bash
# How long after a fault every other rank of the job has its error, run after
# run: a trainer killed, a daemon killed, stopped or cut off, on network-
# namespace hosts (and a trainer killed or stopped on loopback). Each figure
# is what an integration test case measures from the fault to the last other
# rank's exit; this runs each case RUNS times (default 5) and prints the
# median, the fastest and the slowest, as a Markdown table.
#
#   bench/failure_detection.sh [BUILD_DIR]       (as root: the hosts are netns)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
bin="$build/bin/test_integration"
[ -x "$bin" ] || { echo "no $bin: build first (scripts/build.sh)" >&2; exit 1; }

# description | test file | test case | text before the seconds in its MESSAGE
cases=(
  "a trainer killed (3 netns hosts x 2 ranks, 64 MiB allreduces)|test_multihost|*trainer killed mid 64 MiB*|got its error"
  "a daemon killed (3 netns hosts x 2 ranks, --peer-timeout 1s)|test_multihost|*a daemon killed mid-loop*|had their error"
  "a daemon stopped, SIGSTOP (same)|test_multihost|*a daemon stopped mid-loop*|had their error"
  "a host's link cut (same)|test_multihost|*link cut mid-loop*|had their error"
  "a trainer killed (2 nodes on loopback, 2 jobs)|test_jobs|*killed mid-collective*|got its error"
  "a trainer stopped, SIGSTOP (2 nodes on loopback, --rank-liveness-timeout 2s)|test_jobs|*process is stopped*|got their error"
)

echo "| fault | median | fastest | slowest | runs |"
echo "|---|---|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r what file tc marker <<<"$c"
  times=()
  for ((i = 0; i < runs; i++)); do
    out=$("$bin" --source-file="*$file.cpp" --test-case="$tc" 2>&1 || true)
    t=$(grep -o "$marker [0-9.e-]* s" <<<"$out" | head -1 | awk '{print $(NF-1)}')
    if [ -z "$t" ]; then
      echo "$what: run $((i + 1)) printed no time; its output:" >&2
      tail -20 <<<"$out" >&2
      exit 1
    fi
    times+=("$t")
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  median=$(sed -n "$(((runs + 1) / 2))p" <<<"$sorted")
  printf '| %s | %.3f s | %.3f s | %.3f s | %d |\n' "$what" "$median" "$(head -1 <<<"$sorted")" \
    "$(tail -1 <<<"$sorted")" "$runs"
done
