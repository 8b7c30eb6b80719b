#!/usr/bin/env bash
# The main job on one machine, no configuration: installs what is missing, builds,
# then starts a daemon and 4 trainer processes that allreduce 4 B .. 64 MiB,
# verify every result and print the bandwidth table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build >/dev/null
exec build/bin/ringsync demo "$@"
