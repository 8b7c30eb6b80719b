#!/usr/bin/env bash
# The main job on one machine, no configuration: installs what is missing, builds,
# then runs `ringsync demo`: two ringsyncd daemons as two simulated nodes, 2 trainer
# processes on each, that allreduce 4 B .. 64 MiB across all 4 ranks, verify every
# result and print the bandwidth table. Arguments go to the demo (--nodes, --slots,
# --ranks N for a single daemon, --max-bytes, ...; see `ringsync demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build >/dev/null
exec build/bin/ringsync demo "$@"
