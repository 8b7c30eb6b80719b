#!/usr/bin/env bash
# Offline checks of the Grafana dashboards in dashboards/grafana (CTest:
# dashboards.dashboard_schema; dashboards/README.md):
#   0. yamllint --strict on the provisioning files (when yamllint is installed);
#   1. every dashboard against Grafana's own types (@grafana/schema, tsc
#      --strict) and the checks types cannot make: descriptions, units,
#      thresholds, the grid, the datasource/job/instance variables, queries
#      that read only the metrics of known-metrics.txt (check-dashboards.mjs);
#   1b. every query parses as PromQL: promtool check rules on a rules file
#      made of them (queries-as-rules.mjs; when promtool is installed);
#   2. the types themselves: any key added to, or any value retyped in, a
#      dashboard must fail tsc (check-dashboards.mjs --mutate);
#   3. the checker itself: every dashboard under broken/ must be rejected with
#      the message its description names after "Expect: ".
# Needs node and this folder's npm packages (exit 77 without them:
# scripts/install-deploy-deps.sh installs both); yamllint and promtool are
# optional.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The dashboards beside this script (CTest's RINGSYNC_SOURCE_DIR is the same tree).
cd "$here/../../.."
dashboards=dashboards/grafana
checker=tests/dashboards/schema

if ! command -v node >/dev/null; then
  echo "test-dashboards: node not found; skipping (scripts/install-deploy-deps.sh installs it)"
  exit 77
fi
if [[ ! -f $checker/node_modules/.package-lock.json ||
      $checker/package-lock.json -nt $checker/node_modules/.package-lock.json ]]; then
  echo "test-dashboards: $checker/node_modules is missing or older than package-lock.json; skipping" \
       "(scripts/install-deploy-deps.sh runs npm ci there)"
  exit 77
fi

failed=0
fail() { echo "FAIL: $*"; failed=1; }

echo "== yamllint"
if command -v yamllint >/dev/null; then
  yamllint --strict -c $checker/yamllint.yaml -f parsable dashboards/provisioning $checker/yamllint.yaml ||
    fail "yamllint found problems (above)"
else
  echo "yamllint not found: dashboards/provisioning was not linted"
fi

echo "== the dashboards"
node $checker/check-dashboards.mjs $dashboards/*.json || fail "a dashboard in $dashboards is not valid (above)"

echo "== every query parses as PromQL (promtool)"
if command -v promtool >/dev/null; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/ringsync-dashboards.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  if node $checker/queries-as-rules.mjs "$work/queries.yml" $dashboards/*.json; then
    promtool check rules "$work/queries.yml" || fail "a dashboard query does not parse (above: its labels name it)"
  else
    fail "could not collect the dashboards' queries"
  fi
else
  echo "promtool not found: the queries were not parsed by Prometheus"
fi

echo "== the types reject every misspelt key and wrongly typed value"
node $checker/check-dashboards.mjs --mutate $dashboards/*.json ||
  fail "the types accepted a changed dashboard (above)"

echo "== the checker rejects the broken dashboards"
for input in "$checker"/broken/*.json; do
  expect=$(node -e '
    const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const m = /Expect: (.+)$/.exec(d.description ?? "");
    if (m) console.log(m[1]);' "$input")
  if [[ -z $expect ]]; then
    fail "$input has no \"Expect: ...\" in its description"
    continue
  fi
  if out=$(node $checker/check-dashboards.mjs "$input"); then
    echo "$out"
    fail "$input was accepted"
  elif grep -F "$input:" <<<"$out" | grep -qF ": $expect"; then
    echo "rejected as expected: $(grep -F "$input:" <<<"$out" | grep -F ": $expect" | head -1 | cut -c1-240)"
  else
    echo "$out"
    fail "$input was rejected, but no message names $input and \"$expect\""
  fi
done

if ((failed)); then
  echo "test-dashboards: FAILED"
  exit 1
fi
echo "test-dashboards: all checks passed"
