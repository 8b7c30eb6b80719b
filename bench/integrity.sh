#!/usr/bin/env bash
# What the end-to-end result check costs: the same allreduce with
# ringsyncd --verify-results off, sample and all.
#
#   bench/integrity.sh [BUILD_DIR] [--size 64M] [--dtype float] [--nodes 2] [--slots 1] [--iters 10] [--repeat 5]
#
# Each repeat runs one job per mode, modes interleaved (off, sample, all, off, ...)
# so that a noisy machine's drift falls on every mode alike: `ringsync launch`
# starts the daemons on loopback (tcp between them) with --verify-results MODE
# and ringsync-bench times --iters sum allreduces of --size (--dtype: float,
# or int32 / int64, which `all` also checks against the inputs) after 3 warm-up
# ones. Prints one markdown table: per mode the median over repeats of each
# job's median iteration, its cost against off, the median of the costs paired
# repeat by repeat (each run against the off run beside it), and the spread.
# BUILD_DIR (default: build) must hold bin/ringsync, bin/ringsyncd and bin/ringsync-bench.
set -euo pipefail

build_dir=build
size=64M
dtype=float
nodes=2
slots=1
iters=10
repeat=5

usage() { sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "integrity.sh: unknown option $1" >&2; usage ;;
    *) build_dir=$1; shift ;;
  esac
done

for b in ringsync ringsyncd ringsync-bench; do
  if [ ! -x "$build_dir/bin/$b" ]; then
    echo "integrity.sh: $build_dir/bin/$b not found; build it (cmake --build $build_dir --target ringsync ringsyncd ringsync-bench)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-integrity.XXXXXX")
trap 'rm -rf "$work"' EXIT
modes="off sample all"

for r in $(seq "$repeat"); do
  for mode in $modes; do
    csv=$work/$mode.$r.csv
    if ! timeout 600 "$build_dir/bin/ringsync" launch --nodes "$nodes" --slots "$slots" \
        --daemon-arg "--verify-results=$mode" -- \
        "$build_dir/bin/ringsync-bench" -b "$size" -e "$size" -d "$dtype" -n "$iters" -w 3 -c 0 --csv "$csv" \
        > "$work/$mode.$r.log" 2>&1; then
      echo "integrity.sh: the $mode run $r failed:" >&2
      tail -20 "$work/$mode.$r.log" >&2
      exit 1
    fi
  done
done

# The runs' median_us (column 8 of ringsync-bench's CSV), one a line, sorted.
runs_of() {
  for f in "$work"/"$1".*.csv; do sed -n '2p' "$f" | cut -d, -f8; done | sort -g
}
median_of() {
  runs_of "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

off=$(median_of off)
# The median over repeats of (mode's run / the off run just before it) - 1:
# runs side by side in time share the machine's load of the moment.
paired_of() {
  for r in $(seq "$repeat"); do
    paste -d, <(sed -n '2p' "$work/$1.$r.csv" | cut -d, -f8) <(sed -n '2p' "$work/off.$r.csv" | cut -d, -f8)
  done | awk -F, '{ print ($1 / $2 - 1) * 100 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "| --verify-results | median per allreduce (ms) | cost vs off | paired cost (median) | runs' medians, fastest – slowest (ms) |"
echo "|---|---|---|---|---|"
for mode in $modes; do
  m=$(median_of "$mode")
  lo=$(runs_of "$mode" | head -1)
  hi=$(runs_of "$mode" | tail -1)
  paired=$(paired_of "$mode")
  awk -v m="$m" -v off="$off" -v mode="$mode" -v lo="$lo" -v hi="$hi" -v paired="$paired" \
    'BEGIN { printf "| %s | %.2f | %+.1f %% | %+.1f %% | %.2f – %.2f |\n", mode, m / 1000, (m - off) / off * 100, paired, lo / 1000, hi / 1000 }'
done
echo
echo "$size $dtype sum allreduce, $nodes nodes x $slots ranks on loopback, $iters iterations per run," \
     "median over $repeat runs per mode, modes interleaved."
