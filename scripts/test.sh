#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite, each test
# once where it checks most: on the Release build the tests a sanitizer build
# cannot run (CTest label `unsanitized`: Python, deployment, dashboards, the
# elastic tests), built without the other tests' binaries; on an
# AddressSanitizer + UndefinedBehaviorSanitizer build every other test, the
# unit tier and the system tests with their daemons; then a short run of every
# fuzzer (fuzz/). Exits non-zero when any test fails.
#
#   scripts/test.sh          the whole suite (what CI runs)
#   scripts/test.sh --twice  the same, with every test on the Release build
#                            too (about 10 minutes more on 2 cores)
#   scripts/test.sh --fast   the Release build and the unit tier only (CTest
#                            label `unit`, about a minute): the edit-compile-test loop
set -euo pipefail
cd "$(dirname "$0")/.."
release_tests=unsanitized
unit_tier=OFF
system_tier=OFF
case "${1:-}" in
  "") ;;
  --twice) release_tests='.' unit_tier=ON system_tier=ON ;;
  --fast)
    scripts/install-deps.sh
    scripts/build.sh build -DRINGSYNC_UNIT_TESTS=ON
    cd build && exec ctest -L unit -j "$(nproc)" --output-on-failure --timeout 600
    ;;
  *) echo "usage: scripts/test.sh [--fast | --twice]" >&2; exit 2 ;;
esac
# Each stage says how long it took (the CI budget: docs in scripts/README.md).
stage_start=$SECONDS
stage() {
  [ -z "${stage_name:-}" ] || echo "== ${stage_name}: $((SECONDS - stage_start)) s"
  stage_name=$1
  stage_start=$SECONDS
  [ -z "$stage_name" ] || echo "== $stage_name"
}
trap 'stage ""' EXIT

stage "Dependencies"
scripts/install-deps.sh
scripts/install-deploy-deps.sh   # the deployment tests' tools (tests/deploy)

# Tests run two at a time (one per core of a CI machine): each makes its own
# daemons, sockets, ports and network namespaces, and none has a wall-clock
# bound tighter than a hang's (the image build runs alone: RUN_SERIAL).
jobs=$(nproc)
stage "Release build"
scripts/build.sh build -DRINGSYNC_UNIT_TESTS=$unit_tier -DRINGSYNC_SYSTEM_TESTS=$system_tier
stage "Release tests (labels: $release_tests)"
(cd build && ctest -L "$release_tests" -j "$jobs" --output-on-failure --timeout 600)

stage "ASan/UBSan build"
# -O1 -g1 (line tables), as ASan's authors suggest: instrumented code at -O2 -g
# takes over twice as long to compile, and the stack traces still name every
# file and line. The test files themselves build at -O0 (tests/CMakeLists.txt).
# The GPU kernels (which the sanitizers do not instrument) as one PTX target
# rather than three: half of nvcc's time, the same host code.
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGSYNC_SANITIZE=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DCMAKE_CUDA_ARCHITECTURES=90-virtual
stage "ASan/UBSan tests"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest -j "$jobs" --output-on-failure --timeout 900)

# 20 s each from the committed seeds: a regression check and a short search
# (scripts/fuzz.sh alone runs 30 s; RINGSYNC_FUZZ_SECONDS=600 for a long one).
fuzz_seconds=${RINGSYNC_FUZZ_SECONDS:-20}
stage "Fuzzers (libFuzzer, clang 14): every decoder of outside bytes, $fuzz_seconds s each"
RINGSYNC_FUZZ_SECONDS=$fuzz_seconds scripts/fuzz.sh build-fuzz
