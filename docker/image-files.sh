#!/usr/bin/env bash
# Lays out the files the ringsyncd image installs, under DEST, as they will lie in
# the image (DEST/usr/local/...). One list for both ways of building the image: the
# Dockerfile's build stage runs it after compiling, and docker/build-image.sh
# --prebuilt runs it on a host's Release build. (CMake has no install rules yet;
# with them this would be `cmake --install BUILD_DIR --prefix DEST/usr/local`.)
#
#   docker/image-files.sh BUILD_DIR SOURCE_DIR DEST
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR DEST" >&2
  exit 2
fi
build=$1 source=$2 dest=$3
prefix=$dest/usr/local
# Debian 12's python3 is 3.11, and this folder is on its sys.path.
python_site=$prefix/lib/python3.11/dist-packages

# Fails naming the file and the target that makes it, rather than leaving a
# half-filled image.
need() {
  if [ ! -e "$1" ]; then
    echo "image-files: $1 is missing; build the target $2 first" >&2
    exit 1
  fi
}

install_programs() {
  local name
  install -d "$prefix/bin"
  for name in ringsyncd ringsync ringsync-example-trainer; do
    need "$build/bin/$name" "$name"
    install -m 0755 "$build/bin/$name" "$prefix/bin/"
  done
  install -m 0755 "$source/docker/ringsyncd-healthcheck" "$prefix/bin/"
}

# The library with its soname links (cp -P keeps the links as links), and the C
# and C++ headers, so that a trainer image can take both from this one.
install_library() {
  need "$build/lib/libringsync.so.0" ringsync_client
  install -d "$prefix/lib" "$prefix/include/ringsync"
  cp -P "$build"/lib/libringsync.so* "$prefix/lib/"
  install -m 0644 "$source"/client/include/ringsync/*.h* "$prefix/include/ringsync/"
}

# The pure-Python package, without byte-code caches or a library copied next to
# it for pip (the image's library is found by the system loader).
install_python_package() {
  install -d "$python_site"
  tar -C "$source/client/python" --exclude=__pycache__ --exclude='*.pyc' --exclude='libringsync.so*' \
      -cf - ringsync | tar -C "$python_site" -xf -
}

install_programs
install_library
install_python_package
