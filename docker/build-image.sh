#!/usr/bin/env bash
# Builds the ringsyncd image (docker/Dockerfile) with buildah, without a Docker
# daemon or a registry. docs/deploy/container.md.
#
#   docker/build-image.sh [--prebuilt BUILD_DIR] [--tag T] [--cuda] [--jobs N]
#                         [--base IMAGE] [--build-base IMAGE]
#
#   (none)              compile in the image's build stage (a few minutes at -j2)
#   --prebuilt DIR      package a Release build made on this Debian 12 host instead
#                       of compiling again (CI: seconds)
#   --tag T             image name (default ringsync/ringsyncd:VERSION[-cuda])
#   --cuda              the GPU variant: with --prebuilt, DIR must be a CUDA build;
#                       from source, --build-base must name a Debian 12 image with nvcc
#   --jobs N            compile jobs in the build stage (default 2)
#   --base IMAGE        Debian 12 base (default: debian:bookworm-slim if present
#                       locally, else localhost/ringsync-base:bookworm, which
#                       docker/make-base-image.sh makes with debootstrap)
#   --build-base IMAGE  the compile stage's image (default: the base)
#
# Prints each step and the image's size. Needs buildah (the Debian package
# buildah); making the base needs root and debootstrap.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/.." && pwd)
prebuilt="" tag="" cuda=0 jobs=2 base="" build_base=""
local_base=localhost/ringsync-base:bookworm
context_tmp=""
step=0

say() { echo "build-image: $*" >&2; }
die() { say "$*"; exit 1; }
step() { step=$((step + 1)); say "[$step] $*"; }

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --prebuilt) prebuilt=$(cd "$2" && pwd) || die "--prebuilt: no folder $2"; shift 2 ;;
      --tag) tag=$2; shift 2 ;;
      --cuda) cuda=1; shift ;;
      --jobs) jobs=$2; shift 2 ;;
      --base) base=$2; shift 2 ;;
      --build-base) build_base=$2; shift 2 ;;
      -h | --help) sed -n '2,21s/^# \{0,1\}//p' "$0"; exit 0 ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
}

require_buildah() {
  command -v buildah >/dev/null || die "buildah not found; install the Debian package buildah"
  buildah info >/dev/null 2>&1 || die "buildah cannot run here ('buildah info' fails); run as root"
}

project_version() {
  sed -n 's/^project(ringsync VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt"
}

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# A base given with --base is used as named (buildah pulls it if need be). Else a
# local one, so that nothing needs a registry: Debian's own slim image if it is
# here, else ours, made now if missing.
choose_base() {
  pull=()
  if [ -n "$base" ]; then
    step "base image: $base (as given)"
    return
  fi
  pull=(--pull=never)
  if image_exists docker.io/library/debian:bookworm-slim; then
    base=docker.io/library/debian:bookworm-slim
    step "base image: $base (present locally)"
    return
  fi
  base=$local_base
  if image_exists "$base"; then
    step "base image: $base (present locally)"
    return
  fi
  step "base image: $base is missing; making it with debootstrap"
  local started=$SECONDS
  "$here/make-base-image.sh" --tag "$base"
  say "base image made in $((SECONDS - started))s"
}

# ringsyncd of a build links the CUDA runtime unless it carries the stub's refusal.
build_has_cuda() {
  ! grep -q "this ringsync was built without CUDA" "$1/bin/ringsyncd"
}

# The host's build must be a plain Release build of a Debian 12 host: the image
# has Debian 12's libraries and no sanitizer runtime.
check_prebuilt() {
  local cache=$prebuilt/CMakeCache.txt
  [ -x "$prebuilt/bin/ringsyncd" ] || die "--prebuilt $prebuilt: no bin/ringsyncd; build first (scripts/build.sh)"
  if grep -q '^RINGSYNC_SANITIZE:BOOL=ON' "$cache" 2>/dev/null; then
    die "--prebuilt $prebuilt is a sanitizer build; give the Release build folder"
  fi
  grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$cache" 2>/dev/null ||
    say "note: $prebuilt is not a Release build (CMAKE_BUILD_TYPE in $cache)"
  # shellcheck disable=SC1091
  (. /etc/os-release && [ "$ID" = debian ] && [ "$VERSION_ID" = 12 ]) ||
    say "note: this host is not Debian 12; its binaries may need other library versions than the image has"
  if build_has_cuda "$prebuilt"; then
    [ "$cuda" -eq 1 ] || say "note: $prebuilt was built with CUDA (nvcc found); --cuda would tag it as the GPU variant"
  else
    [ "$cuda" -eq 0 ] || die "--cuda: $prebuilt was built without CUDA (nvcc not found); rebuild where nvcc is"
  fi
}

# --prebuilt: a small context holding only prebuilt/, laid out as the image has it.
prepare_context() {
  if [ -z "$prebuilt" ]; then
    context=$source_dir
    [ "$cuda" -eq 0 ] || [ -n "$build_base" ] ||
      die "--cuda from source needs --build-base: a Debian 12 image with the CUDA toolkit (nvcc) in /usr/local/cuda; or give --prebuilt with a CUDA build"
    step "context: the sources in $source_dir (compiled in the build stage, -j$jobs)"
    return
  fi
  check_prebuilt
  context_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-image.XXXXXX")
  context=$context_tmp
  "$here/image-files.sh" "$prebuilt" "$source_dir" "$context/prebuilt"
  step "context: the files of $prebuilt ($(du -sh "$context/prebuilt" | cut -f1))"
}

# OCI labels only this machine knows: the commit, the remote, the time.
provenance_labels() {
  labels=(--label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
  command -v git >/dev/null && git -C "$source_dir" rev-parse HEAD >/dev/null 2>&1 || return 0
  labels+=(--label "org.opencontainers.image.revision=$(git -C "$source_dir" rev-parse HEAD)")
  local remote
  remote=$(git -C "$source_dir" remote get-url origin 2>/dev/null || true)
  [ -z "$remote" ] || labels+=(--label "org.opencontainers.image.source=$remote")
}

# Images without a name that this build left: its intermediate stages (buildah
# keeps them as a cache that only --layers builds use) and the image it replaced
# under the same tag.
dangling_images() { buildah images --filter dangling=true --noheading --quiet --no-trunc 2>/dev/null | sort; }

remove_new_dangling() {
  local id
  for id in $(comm -13 <(printf '%s\n' "$dangling_before") <(dangling_images)); do
    buildah rmi "$id" >/dev/null 2>&1 || true
  done
}

# FROM is passed even at its default: buildah 1.28 resolves a stage named
# through an ARG only from --build-arg (fixed in later buildah).
build() {
  local from=source mode=OFF
  [ -z "$prebuilt" ] || from=prebuilt
  [ "$cuda" -eq 0 ] || mode=ON
  provenance_labels
  dangling_before=$(dangling_images)
  step "buildah bud -t $tag (FROM=$from, RINGSYNC_CUDA=$mode)"
  local started=$SECONDS status=0
  # docker format keeps the HEALTHCHECK (the OCI image format has none).
  buildah bud --isolation chroot --format docker "${pull[@]}" \
      --build-arg BASE="$base" --build-arg BUILD_BASE="${build_base:-$base}" \
      --build-arg FROM="$from" --build-arg RINGSYNC_CUDA="$mode" --build-arg JOBS="$jobs" \
      --build-arg VERSION="$version" "${labels[@]}" \
      -f "$here/Dockerfile" -t "$tag" "$context" || status=$?
  remove_new_dangling
  [ "$status" -eq 0 ] || die "buildah bud failed (exit status $status)"
  say "built in $((SECONDS - started))s"
}

report() {
  step "image: $(buildah images --format '{{.Name}}:{{.Tag}} {{.ID}} {{.Size}}' "$tag" | head -1)"
}

cleanup() { [ -z "$context_tmp" ] || rm -rf "$context_tmp"; }

main() {
  parse_args "$@"
  require_buildah
  version=$(project_version)
  [ -n "$version" ] || die "cannot read the version from $source_dir/CMakeLists.txt"
  tag=${tag:-ringsync/ringsyncd:$version$([ "$cuda" -eq 0 ] || echo -cuda)}
  trap cleanup EXIT
  choose_base
  prepare_context
  build
  report
}

main "$@"
