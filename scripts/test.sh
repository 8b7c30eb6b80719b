#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the Release
# build, then the unit and integration tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-deploy-deps.sh   # the deployment tests' tools (tests/deploy)

echo "== Release build and tests"
scripts/build.sh build
(cd build && ctest --output-on-failure --timeout 600)

echo "== ASan/UBSan build and tests"
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGSYNC_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure --timeout 900)
