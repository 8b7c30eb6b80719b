#!/usr/bin/env bash
# Prepares what cuda/gpu-check.sh needs on a GPU machine that has no package registry:
# builds ringsync with CUDA (nvcc required), then collects into one folder
#   bin/   ringsyncd, ringsync, ringsync-bench, ringsync-cuda-check, ringsync-cuda-bench,
#          ringsync-cuda-trainer, ringsync-cuda-ipc-probe, ringsync-test-rank, and
#          gpu-check.sh itself (with gpu-check-jobs.sh), and bench/gpu_staging.sh
#   lib/   libringsync.so*, and every shared library those programs load that is not
#          part of the base system (glibc, libstdc++, libgcc_s), as ldd resolves it here:
#          UCX (libucp, libucs, libuct, libucm), libnuma, ...
#   lib/ucx/  UCX's transport modules whose own libraries could be collected too
#   PROVENANCE  commit, compiler, CUDA and UCX versions
# The CUDA runtime is linked statically; the GPU machine's driver (libcuda.so.1) and
# NVML (libnvidia-ml.so.1) are used from that machine.
#
# usage: cuda/gpu-bundle.sh [BUILD_DIR [BUNDLE_DIR]]
#        (defaults: build-gpu and BUILD_DIR/bundle, inside the repository; both are
#        ignored by git, so a device session can carry the bundle)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-gpu}
bundle=${2:-$build/bundle}
jobs=${RINGSYNC_BUILD_JOBS:-$(nproc)}

die() { echo "gpu-bundle: $*" >&2; exit 1; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs" --target ringsyncd ringsync ringsync-test-rank ringsync-bench \
  ringsync-cuda-check ringsync-cuda-bench ringsync-cuda-trainer ringsync-cuda-ipc-probe
[[ -x $build/bin/ringsync-cuda-check ]] ||
  die "$build was configured without CUDA (no nvcc found): the check programs are missing"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/ucx"
programs=(ringsyncd ringsync ringsync-test-rank ringsync-bench ringsync-cuda-check ringsync-cuda-bench
          ringsync-cuda-trainer ringsync-cuda-ipc-probe)
for p in "${programs[@]}"; do
  cp "$build/bin/$p" "$bundle/bin/"
  strip --strip-unneeded "$bundle/bin/$p" 2>/dev/null || true
done
cp -P "$build"/lib/libringsync.so* "$bundle/lib/"
cp "$root/cuda/gpu-check.sh" "$root/cuda/gpu-check-jobs.sh" "$root/bench/gpu_staging.sh" "$bundle/bin/"

# Libraries every Linux with a C++ runtime has: left to the machine, whose own copies
# match its kernel and loader.
is_base_library() {
  case "$(basename "$1")" in
    linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | \
      librt.so* | libresolv.so* | libutil.so* | libstdc++.so* | libgcc_s.so*) return 0 ;;
  esac
  return 1
}

# Copies the non-base libraries `file` needs into lib/; fails when one is missing here.
collect_dependencies() {
  local file=$1 line name path
  while read -r line; do
    if [[ $line == *"not found"* ]]; then
      echo "gpu-bundle: $(basename "$file"): ${line%% *} not found" >&2
      return 1
    fi
    [[ $line == *" => /"* ]] || continue
    name=${line%% =>*}
    path=${line#*=> }
    path=${path%% (*}
    is_base_library "$path" && continue
    [[ -e $bundle/lib/$name ]] || cp -L "$path" "$bundle/lib/$name"
  done < <(LD_LIBRARY_PATH="$bundle/lib" ldd "$file")
}

for p in "${programs[@]}"; do collect_dependencies "$bundle/bin/$p"; done

# UCX loads its transport modules from <libdir>/ucx at run time (UCX_MODULE_DIR
# overrides): take each one whose libraries are all here (e.g. not the InfiniBand
# ones on a machine without rdma-core).
ucx_modules=$(pkg-config --variable=libdir ucx)/ucx
for module in "$ucx_modules"/*.so.0; do
  [[ -e $module ]] || continue
  if LD_LIBRARY_PATH="$bundle/lib" ldd "$module" | grep -q "not found"; then
    echo "gpu-bundle: skipping UCX module $(basename "$module") (its libraries are missing here)"
    continue
  fi
  collect_dependencies "$module"
  cp -L "$module" "$bundle/lib/ucx/"
done

{
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  echo "compiler: $(c++ --version | head -1)"
  echo "nvcc: $(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' \
    "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)"
  echo "ucx: $(pkg-config --modversion ucx)"
} >"$bundle/PROVENANCE"

echo "gpu-bundle: $bundle ($(du -sh "$bundle" | cut -f1)):"
(cd "$bundle" && find . -type f | sort | sed 's/^\.\//  /')
echo "run on the GPU machine: $bundle/bin/gpu-check.sh $bundle"
