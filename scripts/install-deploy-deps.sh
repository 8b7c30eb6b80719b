#!/usr/bin/env bash
# Installs what the deployment tests (tests/deploy/) and the dashboard check
# (tests/dashboards/schema) need that is not installed yet, from Debian's
# packages and, for the two checkers written in Node.js, from npm.
# Idempotent: a second run installs nothing.
#
#   buildah, debootstrap   build the container image (docker/build-image.sh)
#   slurm-wlm, munge       a real Slurm cluster for tests/deploy/slurm
#   yamllint               the manifests' YAML style
#   nodejs, npm            the manifest checker (tests/deploy/k8s/validate.mjs),
#                          the dashboard checker (tests/dashboards/schema) and
#                          their npm packages (npm ci, from package-lock.json)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  buildah debootstrap
  slurm-wlm munge
  yamllint
)
# A machine with Node.js from elsewhere (its own npm included) keeps it; Debian's
# npm would conflict with it.
command -v npm >/dev/null || packages+=(nodejs npm)

scripts/apt-install.sh install-deploy-deps "${packages[@]}"

# npm ci in a checker's folder, unless its node_modules matches package-lock.json.
npm_ci() {
  local checker=$1
  if [[ ! -f $checker/node_modules/.package-lock.json ||
        $checker/package-lock.json -nt $checker/node_modules/.package-lock.json ]]; then
    echo "install-deploy-deps: npm ci in $checker"
    (cd "$checker" && npm ci --no-audit --no-fund --loglevel=error)
  else
    echo "install-deploy-deps: $checker/node_modules is up to date"
  fi
}

npm_ci tests/deploy/k8s
npm_ci tests/dashboards/schema
