#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet; nothing when all
# are (so it is idempotent). Used by scripts/install-deps.sh and bench/install-peers.sh.
#
#   scripts/apt-install.sh NAME PACKAGE...     NAME prefixes the messages
set -euo pipefail

name=$1
shift
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "$name: everything is installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "$name: missing packages: ${missing[*]}" >&2
    echo "$name: run this script as root (or install sudo) to install them" >&2
    exit 1
  fi
fi

echo "$name: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
