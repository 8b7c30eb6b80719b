#!/usr/bin/env bash
# deploy.container_image: builds the ringsyncd image from this Release build
# (docker/build-image.sh --prebuilt, so nothing is compiled a second time) and
# checks it from the inside, with buildah (there is no Docker daemon or
# `podman run` here): the programs run (--help shows UCX's choice as the
# transports default), the configuration (user, labels, environment, ports,
# health check) is what docs/deploy/container.md says, the programs the
# Kubernetes manifests run are where they say, no compiler is left in it, the
# demo's every element is right as the non-root user, and a daemon answers
# /healthz and /readyz.
#
# Environment (CTest sets both): RINGSYNC_BUILD_DIR, the Release build folder;
# RINGSYNC_SOURCE_DIR, the repository. Exit 77 (skipped) only where buildah
# cannot run at all. The container and the test's image are removed on exit; the
# base image stays (docker/make-base-image.sh makes it once, in 2-3 minutes).
set -uo pipefail

source_dir=${RINGSYNC_SOURCE_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)}
build_dir=${RINGSYNC_BUILD_DIR:-$source_dir/build}
run_id=$$-$RANDOM   # the pid first: remove_stale_test_images reads it
tag=localhost/ringsync/ringsyncd-test:$run_id
max_image_mb=150   # 99 MB measured; a compiler or a build tree in it would pass this
ctr=""
work=""
failures=0

skip() { echo "SKIP: $*"; exit 77; }
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check STATUS OK_MESSAGE FAIL_MESSAGE: the verdict of the test just run ($?).
check() { if [ "$1" -eq 0 ]; then ok "$2"; else fail "$3"; fi; }

require_buildah() {
  command -v buildah >/dev/null || skip "buildah is not installed (Debian package buildah)"
  [ "$(id -u)" -eq 0 ] || skip "buildah needs root here (image storage, chroot isolation); run as root"
  buildah info >/dev/null 2>&1 || skip "buildah cannot run on this machine ('buildah info' fails)"
}

cleanup() {
  [ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
  buildah rmi "$tag" >/dev/null 2>&1 || true
  [ -z "$work" ] || rm -rf "$work"
}

# A command in the container as the image's user, bounded in time.
in_image() { timeout 120 buildah run --isolation chroot "$ctr" -- "$@"; }

# Containers and images of runs that were killed (no trap ran): their names end
# in the run's id, which starts with the pid of the run.
remove_stale_test_images() {
  local name pid
  for name in $(buildah containers --format '{{.ContainerName}}' | grep '^ringsyncd-test-'); do
    pid=${name#ringsyncd-test-}
    kill -0 "${pid%%-*}" 2>/dev/null || buildah rm "$name" >/dev/null 2>&1 || true
  done
  for name in $(buildah images --format '{{.Name}}:{{.Tag}}' | grep '/ringsyncd-test:'); do
    pid=${name##*:}
    kill -0 "${pid%%-*}" 2>/dev/null || buildah rmi "$name" >/dev/null 2>&1 || true
  done
}

image_field() { buildah inspect --type image --format "$1" "$tag"; }

project_version() { sed -n 's/^project(ringsync VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt"; }

build_image() {
  local started=$SECONDS
  if ! timeout 900 "$source_dir/docker/build-image.sh" --prebuilt "$build_dir" --tag "$tag" >"$work/build.log" 2>&1; then
    tail -40 "$work/build.log"
    echo "FAIL: docker/build-image.sh --prebuilt $build_dir (its output above)"
    exit 1
  fi
  grep '^build-image:' "$work/build.log"
  ok "image built in $((SECONDS - started))s"
  ctr=$(buildah from --pull=never --name "ringsyncd-test-$run_id" "$tag") || { echo "FAIL: buildah from $tag"; exit 1; }
}

check_size() {
  local size
  size=$(buildah images --format '{{.Size}}' "$tag" | head -1)
  # "98.7 MB" (buildah's decimal units)
  local mb
  mb=$(awk '{ v = $1; if ($2 == "GB") v *= 1000; if ($2 == "kB") v /= 1000; printf "%d", v }' <<<"$size")
  if [ "$mb" -le "$max_image_mb" ]; then ok "image size $size (limit ${max_image_mb} MB)"; else fail "image size $size > ${max_image_mb} MB"; fi
}

check_programs() {
  local version out
  version=$(project_version)
  out=$(in_image ringsyncd --version)
  [ "$out" = "ringsyncd $version" ]
  check $? "ringsyncd --version: $out" "ringsyncd --version printed '$out', want 'ringsyncd $version'"
  out=$(in_image ringsyncd --help)
  # The transports default is empty: UCX picks (verbs on an RDMA fabric).
  awk '/^  --ucx-transports/ { on = 1 } on && /default:/ { print; exit }' <<<"$out" | grep -q 'default: ""'
  check $? "ringsyncd --help: --ucx-transports defaults to UCX's choice (empty)" \
    "ringsyncd --help: no --ucx-transports with default \"\" in it"
  out=$(in_image ringsync version)
  [ "$out" = "ringsync $version" ]
  check $? "ringsync version: $out" "ringsync version printed '$out'"
  out=$(in_image sh -c 'command -v g++ gcc cc c++ cmake make; true')
  [ -z "$out" ]
  check $? "no compiler or build tool in the image" "build tools in the image: $out"
}

check_config() {
  local version user env ports
  version=$(project_version)
  user=$(image_field '{{.OCIv1.Config.User}}')
  [ "$user" = 10001:10001 ]
  check $? "default user $user" "default user is '$user', want 10001:10001"
  [ "$(in_image id -u)" = 10001 ]
  check $? "processes run as uid 10001" "processes do not run as uid 10001"
  local label
  for label in title:ringsyncd version:"$version" licenses: description: created: revision:; do
    local key=${label%%:*} want=${label#*:} got
    [ "$key" = revision ] && ! git -C "$source_dir" rev-parse HEAD >/dev/null 2>&1 && continue
    got=$(image_field "{{index .OCIv1.Config.Labels \"org.opencontainers.image.$key\"}}")
    if [ -n "$got" ] && { [ -z "$want" ] || [ "$got" = "$want" ]; }; then ok "label org.opencontainers.image.$key=$got"
    else fail "label org.opencontainers.image.$key is \"$got\"${want:+, want \"$want\"}"; fi
  done
  env=$(image_field '{{range .OCIv1.Config.Env}}{{println .}}{{end}}')
  for want in RINGSYNC_SOCKET=/run/ringsync/ringsyncd.sock RINGSYNC_METRICS_ADDRESS=0.0.0.0:9400; do
    grep -qx "$want" <<<"$env"
    check $? "ENV $want" "ENV $want missing"
  done
  # shellcheck disable=SC2016  # a Go template, not shell
  ports=$(image_field '{{range $p, $v := .OCIv1.Config.ExposedPorts}}{{$p}} {{end}}')
  [ "$ports" = "29517/tcp 9400/tcp " ]
  check $? "EXPOSE $ports" "exposed ports are '$ports', want 9400/tcp 29517/tcp"
  [ "$(image_field '{{.OCIv1.Config.Entrypoint}}')" = "[ringsyncd]" ]
  check $? "ENTRYPOINT [ringsyncd]" "ENTRYPOINT is not [ringsyncd]"
  local health
  health=$(image_field '{{if .Docker.Config.Healthcheck}}{{.Docker.Config.Healthcheck.Test}}{{end}}')
  [[ $health == *ringsyncd-healthcheck* ]]
  check $? "HEALTHCHECK $health" "no HEALTHCHECK (docker format) in the image"
}

# The programs the Kubernetes manifests run (each container's command[0]) are
# in the image, where the manifests say.
check_manifest_commands() {
  local program found=0
  while read -r program; do
    found=$((found + 1))
    # shellcheck disable=SC2016  # expanded in the container
    in_image sh -c 'command -v "$1"' sh "$program" </dev/null >/dev/null
    check $? "deploy/k8s runs $program: in the image" "deploy/k8s runs $program, which the image does not have"
  done < <(grep -rhoE '^ *command: \["[^"]+"' "$source_dir/deploy/k8s" | sed -E 's/.*\["//; s/"$//' | sort -u)
  [ "$found" -gt 0 ] || fail "no 'command: [...]' found in $source_dir/deploy/k8s"
}

# ringsync demo --ranks 2: one daemon, two trainer processes, every element
# checked; rank 0's table ends each row with #wrong.
check_demo() {
  local out status rows wrong
  out=$(in_image ringsync demo --ranks 2 --max-bytes 1M 2>&1)
  status=$?
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8' <<<"$out" | wc -l)
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8 && $NF != 0' <<<"$out" | wc -l)
  if [ "$status" -eq 0 ] && [ "$rows" -ge 19 ] && [ "$wrong" -eq 0 ]; then
    ok "ringsync demo --ranks 2 --max-bytes 1M as uid 10001: $rows sizes, #wrong 0 in every row"
  else
    echo "$out" | tail -30
    fail "ringsync demo: exit status $status, $rows sizes, $wrong rows with #wrong != 0"
  fi
}

# The image's own configuration, started in the background inside the container:
# the socket where RINGSYNC_SOCKET says, then the probes through the image's
# ringsyncd-healthcheck. The metrics port is 0 (any free one: chroot isolation
# shares this machine's network) on the image's wildcard address.
# shellcheck disable=SC2016  # expanded in the container
daemon_script='
  ringsyncd --ready-file /tmp/ready --log-level warn >/tmp/ringsyncd.log 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -s /tmp/ready ] && break; sleep 0.1; done
  if [ ! -s /tmp/ready ]; then echo "no ready file after 10s"; cat /tmp/ringsyncd.log; kill $pid; exit 1; fi
  export RINGSYNC_METRICS_ADDRESS=$(sed -n "s/^metrics=//p" /tmp/ready)
  echo "socket: $(stat -c "%U %a %F" "$RINGSYNC_SOCKET")"
  echo "healthz: $(ringsyncd-healthcheck /healthz | tr "\n" " ")"
  echo "readyz: $(ringsyncd-healthcheck /readyz | tr "\n" " ")"
  kill -TERM $pid
  wait $pid
  echo "daemon exit: $?"
'

check_daemon() {
  local out
  out=$(in_image env RINGSYNC_METRICS_ADDRESS=0.0.0.0:0 bash -c "$daemon_script" 2>&1)
  awk '{ print "  | " $0 }' <<<"$out"
  grep -qx 'socket: ringsync 600 socket' <<<"$out"
  check $? "daemon socket at \$RINGSYNC_SOCKET, owned by ringsync, mode 600" \
    "daemon socket not at /run/ringsync/ringsyncd.sock as ringsync 600"
  grep -q '^healthz: HTTP/1.[01] 200' <<<"$out"
  check $? "/healthz 200" "/healthz did not answer 200"
  grep -q '^readyz: HTTP/1.[01] 200 .*ready' <<<"$out"
  check $? "/readyz 200 ready" "/readyz did not answer 200 ready"
  grep -qx 'daemon exit: 0' <<<"$out"
  check $? "daemon stops cleanly on SIGTERM" "daemon did not exit 0 on SIGTERM"
}

# The image has no Python; trainer images copy the package and the library out
# of it. This machine's python3 imports them from the image's file system.
check_python_package() {
  command -v python3 >/dev/null || { echo "note: no python3 here; the Python package is not checked"; return; }
  local mnt out
  mnt=$(buildah mount "$ctr") || { fail "buildah mount"; return; }
  out=$(PYTHONPATH="$mnt/usr/local/lib/python3.11/dist-packages" RINGSYNC_LIBRARY="$mnt/usr/local/lib/libringsync.so.0" \
        timeout 60 python3 -c 'import ringsync; print(ringsync.__version__, ringsync.library_path())' 2>&1)
  buildah umount "$ctr" >/dev/null
  [[ $out == "$(project_version) $mnt/usr/local/lib/libringsync.so.0" ]]
  check $? "the Python package and libringsync.so.0 from the image load" "Python package from the image: $out"
}

main() {
  require_buildah
  [ -x "$build_dir/bin/ringsyncd" ] || { echo "FAIL: no $build_dir/bin/ringsyncd (set RINGSYNC_BUILD_DIR to the Release build)"; exit 1; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-image-test.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  remove_stale_test_images
  local started=$SECONDS
  build_image
  check_size
  check_programs
  check_config
  check_manifest_commands
  check_demo
  check_daemon
  check_python_package
  echo "$failures failure(s) in $((SECONDS - started))s"
  [ "$failures" -eq 0 ]
}

main "$@"
