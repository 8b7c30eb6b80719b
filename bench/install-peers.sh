#!/usr/bin/env bash
# Installs, from Debian's packages, what the peer benchmarks in bench/peers need:
# OpenMPI (mpi-allreduce-bench, run with mpirun) and Gloo (gloo-allreduce-bench).
# libgloo-dev brings the libraries Gloo's headers and libgloo.so need to link
# (libhiredis-dev, libibverbs-dev) as its own dependencies; they are named here too so
# that a partial install is completed. --torch adds python3-torch (torch.distributed
# with its Gloo backend, for comparing from Python).
#
# Idempotent: a second run installs nothing. Kept apart from scripts/install-deps.sh
# so that CI, which never runs the peers, stays lean.
#
#   bench/install-peers.sh [--torch]
set -euo pipefail

packages=(
  libopenmpi-dev openmpi-bin          # MPI_Allreduce, mpicxx, mpirun
  libgloo-dev libhiredis-dev libibverbs-dev  # Gloo and what libgloo.so links against
)

for arg in "$@"; do
  case "$arg" in
    --torch) packages+=(python3-torch) ;;
    -h|--help) sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) echo "install-peers: unknown option '$arg' (--torch, --help)" >&2; exit 2 ;;
  esac
done

exec "$(dirname "$0")/../scripts/apt-install.sh" install-peers "${packages[@]}"
