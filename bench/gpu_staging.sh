#!/usr/bin/env bash
# The daemon's multi-node path for GPU buffers, against the same job on host
# memory: 2 simulated nodes x 2 ranks on one GPU machine (ringsync launch), f32 sum
# allreduces of 64 MiB timed back to back (nccl-tests' busbw), for each link between
# the daemons (tcp over loopback, and UCX shared memory, which is faster and so
# shows what the staging costs):
#   host      ringsync-bench on shared-memory buffers (no GPU)
#   gpu       ringsync-cuda-trainer on device memory, staged chunk by chunk while the ring runs
#   gpu-whole the same with --gpu-staging-chunk=0: whole copies before and after the ring
# Every result of the GPU runs is checked first (the trainer's checked iterations).
#
# usage: bench/gpu_staging.sh BUNDLE [OUT_DIR]   (BUNDLE: what cuda/gpu-bundle.sh makes)
set -uo pipefail
bundle=$(cd "${1:?usage: gpu_staging.sh BUNDLE [OUT_DIR]}" && pwd) || exit 2
out=${2:-$(mktemp -d "${TMPDIR:-/tmp}/ringsync-gpu-staging.XXXXXX")}
mkdir -p "$out"
bin=$bundle/bin
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d $bundle/lib/ucx ]] && export UCX_MODULE_DIR="$bundle/lib/ucx"
export UCX_WARN_UNUSED_ENV_VARS=n
bytes=$((64 << 20))
count=$((bytes / 4))

# run NAME TRANSPORTS EXTRA-DAEMON-ARG -- CMD...: one launch; its rank 0 line.
run() {
  local name=$1 tls=$2 extra=$3
  shift 4
  local args=(--daemon-arg "--ucx-transports=$tls")
  [[ -n $extra ]] && args+=(--daemon-arg "$extra")
  timeout 300 "$bin/ringsync" launch --nodes 2 --slots 2 --timeout 280s "${args[@]}" -- "$@" \
    >"$out/$name.log" 2>&1
  echo $?
}

printf '| link between daemons | path | time per 64 MiB allreduce | busbw | vs host |\n|---|---|---|---|---|\n' |
  tee "$out/table.md"
for tls in tcp,self posix,cma,self; do
  rc=$(run "host-$tls" "$tls" "" -- "$bin/ringsync-bench" -b $bytes -e $bytes -n 20 -w 3)
  # "[rank 0]   size  count  type  redop  root  time(us) ...": the launcher's prefix, then nccl-tests' row
  host_us=$(awk -v b="$bytes" '$1 == "[rank" && $2 == "0]" && $3 == b {print $8; exit}' "$out/host-$tls.log")
  [[ $rc == 0 && -n $host_us ]] || host_us=""
  printf '| %s | host memory | %s us | | |\n' "$tls" "${host_us:-FAILED (exit $rc)}" | tee -a "$out/table.md"
  for mode in pipelined whole; do
    extra=""
    [[ $mode == whole ]] && extra=--gpu-staging-chunk=0
    rc=$(run "gpu-$mode-$tls" "$tls" "$extra" -- "$bin/ringsync-cuda-trainer" --dtype f32 --op sum \
      --count $count --iterations 3 --timed 20 --busy-ms 0)
    line=$(grep -m1 '^\[rank 0\] .*back to back' "$out/gpu-$mode-$tls.log")
    ms=$(sed -n 's/.*back to back: \([0-9.]*\) ms each.*/\1/p' <<<"$line")
    bw=$(sed -n 's/.*busbw \([0-9.]*\) GB\/s$/\1/p' <<<"$line")
    if [[ $rc != 0 || -z $ms ]]; then
      printf '| %s | GPU, %s | FAILED (exit %s, %s) | | |\n' "$tls" "$mode" "$rc" "$out/gpu-$mode-$tls.log" | tee -a "$out/table.md"
      continue
    fi
    ratio=$([[ -n $host_us ]] && awk -v h="$host_us" -v g="$ms" 'BEGIN {printf "%.2fx", g * 1000 / h}')
    printf '| %s | GPU, staged %s | %s ms | %s GB/s | %s |\n' "$tls" "$mode" "$ms" "$bw" "$ratio" | tee -a "$out/table.md"
  done
done
echo "logs: $out"
