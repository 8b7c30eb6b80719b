#!/usr/bin/env bash
# Makes a Debian 12 (bookworm) base image without a registry: debootstrap a
# minbase root file system from the Debian mirror this machine's apt already uses,
# slim it as debian:bookworm-slim is slimmed, and commit it with buildah as
# localhost/ringsync-base:bookworm (or --tag). apt inside the image then uses the
# same mirror. docker/build-image.sh calls it when no base image is at hand.
#
#   docker/make-base-image.sh [--tag T] [--rebuild]
#
# The root file system is cached (RINGSYNC_IMAGE_CACHE, default
# ~/.cache/ringsync/image) so that a removed image is remade in seconds;
# --rebuild bootstraps afresh. The mirror is read from /etc/apt/sources.list and
# /etc/apt/sources.list.d/ at run time; RINGSYNC_DEBIAN_MIRROR overrides it.
# Needs root, buildah and debootstrap (Debian packages of the same names).
set -euo pipefail

tag=localhost/ringsync-base:bookworm
rebuild=0
suite=bookworm
cache=${RINGSYNC_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ringsync/image}
rootfs=$cache/rootfs-$suite

say() { echo "make-base-image: $*" >&2; }
die() { say "$*"; exit 1; }

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --tag) tag=$2; shift 2 ;;
      --rebuild) rebuild=1; shift ;;
      -h | --help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
}

require_tools() {
  [ "$(id -u)" -eq 0 ] || die "run as root: debootstrap and buildah mount need it"
  command -v buildah >/dev/null || die "buildah not found; install the Debian package buildah"
  command -v debootstrap >/dev/null || die "debootstrap not found; install the Debian package debootstrap"
}

# The apt source files apt itself reads (other names, e.g. *.disabled, it ignores).
apt_source_files() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && echo "$f"
  done
  return 0
}

# The first URI of a "deb" source for SUITE ($1), from both formats: one-line
# ("deb [options] URI SUITE COMPONENTS...") and deb822 stanzas (Types:, URIs:,
# Suites:, Enabled:, separated by blank lines).
apt_uri_for_suite() {
  local files
  mapfile -t files < <(apt_source_files)
  [ ${#files[@]} -gt 0 ] || return 0
  awk -v suite="$1" '
    function has(list, word,   n, i, w) { n = split(list, w, /[ \t]+/); for (i = 1; i <= n; i++) if (w[i] == word) return 1; return 0 }
    # (exit runs END, which calls this again: "found" keeps it to one line.)
    function stanza_end() {
      if (!found && has(types, "deb") && has(suites, suite) && enabled != "no" && uris != "") {
        split(uris, u, /[ \t]+/); print u[1]; found = 1; exit
      }
      types = ""; uris = ""; suites = ""; enabled = ""
    }
    FNR == 1 { stanza_end() }
    /^[ \t]*#/ { next }
    FILENAME ~ /\.list$/ {
      if ($1 != "deb") next
      i = 2
      if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
      if ($(i + 1) == suite) { print $i; found = 1; exit }
      next
    }
    /^[ \t]*$/ { stanza_end(); next }
    { key = tolower($1); sub(/^[^:]*:[ \t]*/, ""); value = $0 }
    key == "types:" { types = value } key == "uris:" { uris = value }
    key == "suites:" { suites = value } key == "enabled:" { enabled = tolower(value) }
    END { stanza_end() }
  ' "${files[@]}"
}

find_mirrors() {
  mirror=${RINGSYNC_DEBIAN_MIRROR:-$(apt_uri_for_suite "$suite")}
  security=$(apt_uri_for_suite "$suite-security")
  [ -n "$mirror" ] || die "no Debian '$suite' source in this machine's apt configuration; set RINGSYNC_DEBIAN_MIRROR to a Debian mirror's URL"
  say "Debian mirror: $mirror${security:+ (security updates: $security)}"
}

# apt in the image uses the same mirror, with bookworm-updates and, where this
# machine has one, the security archive.
write_apt_sources() {
  rm -f "$1/etc/apt/sources.list"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$mirror" "$suite" "$suite"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    if [ -n "$security" ]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$security" "$suite"
      printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
  } >"$1/etc/apt/sources.list.d/debian.sources"
}

# What debian:bookworm-slim leaves out (docs, man pages, translations; copyright
# files stay), for what is installed now and for later apt-get installs; no apt
# caches; nothing of the machine that built it (hostname, logs, device nodes).
slim_rootfs() {
  local root=${1:?}
  cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
# Like debian:*-slim: no documentation, manual pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
# Downloaded packages are deleted after installing: they would only grow the layer.
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,info,groff,linda,locale}/* "$root"/usr/share/lintian/overrides/*
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  rm -rf "${root:?}"/dev/* "$root"/run/* "$root"/tmp/* "$root"/var/log/bootstrap.log
  find "$root/var/log" -type f -exec truncate -s 0 {} +
  rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
}

# debootstrap into a scratch folder, renamed into the cache only when complete,
# so that an interrupted run is not mistaken for a cached one.
bootstrap_rootfs() {
  if [ -d "$rootfs" ] && [ "$rebuild" -eq 0 ]; then
    say "cached root file system: $rootfs"
    return
  fi
  find_mirrors
  local partial=$rootfs.partial
  rm -rf "$partial" "$rootfs"
  mkdir -p "$cache"
  say "debootstrap --variant=minbase $suite (about a minute)"
  local started=$SECONDS
  if ! debootstrap --variant=minbase "$suite" "$partial" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    tail -20 "$cache/debootstrap.log" >&2
    die "debootstrap failed; its log: $cache/debootstrap.log"
  fi
  write_apt_sources "$partial"
  slim_rootfs "$partial"
  mv "$partial" "$rootfs"
  say "root file system ready in $((SECONDS - started))s: $(du -sh "$rootfs" | cut -f1)"
}

# debootstrap takes the point release; the updates and security fixes since then
# come from bookworm-updates and the security archive. In a container, so that
# apt has /proc, /dev and a resolv.conf, none of which stays in the image.
upgrade_packages() {
  say "apt-get upgrade (updates and security fixes since the point release)"
  local log=$cache/upgrade.log
  if ! buildah run --isolation chroot "$1" -- sh -c '
      apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade &&
      apt-get clean && rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/dpkg.log' >"$log" 2>&1; then
    tail -20 "$log" >&2
    die "apt-get upgrade in the base image failed; its log: $log"
  fi
}

# A scratch container, the root file system copied in with tar (which keeps
# owners, modes, links and hard links), committed as the image.
commit_image() {
  local ctr mnt
  ctr=$(buildah from scratch)
  # On failure the half-made container goes too.
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  mnt=$(buildah mount "$ctr")
  tar -C "$rootfs" -cf - . | tar -C "$mnt" -xf -
  buildah umount "$ctr" >/dev/null
  upgrade_packages "$ctr"
  buildah config --created-by "debootstrap --variant=minbase $suite (docker/make-base-image.sh)" \
      --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash \
      --label org.opencontainers.image.title="Debian $suite (minbase, slim)" \
      --label org.opencontainers.image.description="Debian $suite minbase from debootstrap, slimmed like debian:$suite-slim (docker/make-base-image.sh)" \
      "$ctr"
  buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
  trap - EXIT
  say "committed $tag ($(buildah images --format '{{.Size}}' "$tag" | head -1))"
}

main() {
  parse_args "$@"
  require_tools
  bootstrap_rootfs
  commit_image
}

main "$@"
