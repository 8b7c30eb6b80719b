#!/usr/bin/env bash
# Installs, from Debian's packages, whatever ringsync needs to build and test that
# is not installed yet. Idempotent: a second run installs nothing.
set -euo pipefail

packages=(
  g++ cmake make pkg-config git
  libucx-dev ucx-utils
  libboost-dev
  libflatbuffers-dev flatbuffers-compiler
  doctest-dev
  prometheus         # promtool and a real server for the metrics tests
  iproute2 procps    # ip netns for multi-host tests; ps/pkill in scripts
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run this script as root (or install sudo) to install them" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
