#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang 14 into build-fuzz/, or the
# folder given as $1, and runs each for $RINGSYNC_FUZZ_SECONDS (default 30)
# from the committed seeds, plus each on the canary input it must fail on.
# Exits non-zero when a harness finds a crash (the input is saved under
# build-fuzz/fuzz/ as crash-*; add it to the harness's seeds with the fix).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-fuzz}
seconds=${RINGSYNC_FUZZ_SECONDS:-30}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -O1 -g1"
mkdir -p "$build_dir"
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE= -DRINGSYNC_FUZZ=ON \
  -DRINGSYNC_TESTS=OFF -DRINGSYNC_CUDA=OFF -DRINGSYNC_FUZZ_SECONDS="$seconds" \
  "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" > "$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
targets=()
for harness in fuzz/*.cpp; do
  name=$(basename "$harness" .cpp)
  [ "$name" = make_seeds ] || targets+=(--target "fuzz_$name")
done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
(cd "$build_dir/fuzz" && ctest -j "$(nproc)" -R '^fuzz\.' --output-on-failure --timeout $((seconds + 120)))
