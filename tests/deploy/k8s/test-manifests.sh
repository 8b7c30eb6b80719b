#!/usr/bin/env bash
# Offline checks of the Kubernetes manifests in deploy/k8s (CTest:
# deploy.k8s_manifests; docs/deploy/kubernetes.md):
#   1. yamllint --strict on every manifest (config: yamllint.yaml here);
#   2. kubectl kustomize on every kustomization, with no warning;
#   3. every document, as written and as rendered, against the Kubernetes
#      schemas with unknown keys rejected (validate.mjs);
#   4. the checker itself: every file under broken/ must be rejected with a
#      message that names the file, the path and the key its header expects,
#      and on the rendered manifests any added key or wrongly typed value.
# Needs node and yamllint (exit 77 without them) and this folder's npm
# packages (installed with npm ci when missing); kubectl is optional.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The manifests beside this script (CTest's RINGSYNC_SOURCE_DIR is the same tree).
cd "$here/../../.."
manifests=deploy/k8s
checker=tests/deploy/k8s

for tool in node yamllint; do
  if ! command -v "$tool" >/dev/null; then
    echo "test-manifests: $tool not found; skipping (scripts/install-deps.sh installs it)"
    exit 77
  fi
done

if [[ ! -f $checker/node_modules/.package-lock.json ||
      $checker/package-lock.json -nt $checker/node_modules/.package-lock.json ]]; then
  echo "test-manifests: installing the checker's npm packages (npm ci in $checker)"
  (cd "$checker" && npm ci --no-audit --no-fund --loglevel=error)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-k8s.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

echo "== yamllint"
yamllint --strict -c $checker/yamllint.yaml -f parsable $manifests $checker/broken $checker/yamllint.yaml ||
  fail "yamllint found problems (above)"

echo "== schemas: the files as written (patches as partial documents)"
node $checker/validate.mjs --tree $manifests || fail "a manifest in $manifests is not valid (above)"

echo "== kubectl kustomize"
# kubectl 1.24 and later name their kustomize; an older one (Debian 12's
# kubernetes-client is 1.20, kustomize v2) cannot read these kustomizations.
kustomize=$(command -v kubectl >/dev/null && kubectl version --client 2>/dev/null |
            sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p' || true)
if [[ -n $kustomize && $kustomize -ge 4 ]]; then
  while read -r kustomization; do
    dir=$(dirname "$kustomization")
    rendered=$work/$(basename "$dir").yaml
    if ! kubectl kustomize "$dir" >"$rendered" 2>"$work/stderr" || [[ -s $work/stderr ]]; then
      cat "$work/stderr"
      fail "kubectl kustomize $dir failed or warned"
      continue
    fi
    if ! node $checker/validate.mjs --rendered "kubectl kustomize $dir" "$rendered"; then
      fail "kubectl kustomize $dir renders an invalid manifest (above)"
    elif ! node $checker/validate.mjs --mutate "$rendered"; then
      fail "the checker missed a change to what $dir renders (above)"
    fi
  done < <(find $manifests -name kustomization.yaml | sort)
else
  echo "kubectl with kustomize v4 or later not found: the kustomizations were not rendered" \
       "(their files were checked as written)"
fi

echo "== the checker rejects the broken inputs"
for input in $checker/broken/*; do
  if [[ -d $input ]]; then
    args=(--tree "$input")
    expects=$(cat "$input"/*.yaml)
  else
    args=("$input")
    expects=$(cat "$input")
  fi
  path=$(sed -n 's/^# expect-path: //p' <<<"$expects")
  key=$(sed -n 's/^# expect-key: //p' <<<"$expects")
  if [[ -z $path || -z $key ]]; then
    fail "$input has no '# expect-path:' and '# expect-key:' lines"
    continue
  fi
  if out=$(node $checker/validate.mjs "${args[@]}"); then
    echo "$out"
    fail "$input was accepted"
  elif grep -F "$input" <<<"$out" | grep -F ": $path" | grep -qF "\"$key\""; then
    echo "rejected as expected: $(grep -F ": $path" <<<"$out" | grep -F "\"$key\"" | head -1)"
  else
    echo "$out"
    fail "$input was rejected, but no message names $input, $path and \"$key\""
  fi
done

if ((failed)); then
  echo "test-manifests: FAILED"
  exit 1
fi
echo "test-manifests: all checks passed"
