#!/usr/bin/env bash
# Installs, from Debian's packages, whatever ringsync needs to build and test that
# is not installed yet. Idempotent: a second run installs nothing.
set -euo pipefail

packages=(
  g++ cmake make pkg-config git
  libucx-dev ucx-utils
  libboost-dev
  nlohmann-json3-dev libssl-dev  # the rendezvous store's JSON, the job token's HMAC
  libflatbuffers-dev flatbuffers-compiler
  doctest-dev
  prometheus         # promtool and a real server for the metrics tests
  etcd-server etcd-client  # a real etcd (and etcdctl) for the rendezvous tests
  iproute2 procps    # ip netns for multi-host tests; ps/pkill in scripts
  python3 python3-numpy python3-torch  # the Python package's tests (PyTorch CPU)
  libtorch-dev pybind11-dev python3-dev  # the torch.distributed backend (client/torch)
  clang-14 libclang-rt-14-dev  # libFuzzer for the fuzzers (fuzz/, scripts/fuzz.sh)
)

exec "$(dirname "$0")/apt-install.sh" install-deps "${packages[@]}"
