#!/usr/bin/env bash
# Offline checks of the Prometheus rules in dashboards/rules (CTest:
# dashboards.alert_rules):
#   1. promtool check rules on dashboards/rules/*.rules.yml;
#   2. every alert has for:, labels.severity and the annotations summary,
#      description and runbook; every alert has a unit test where it fires and
#      one where it does not; every recording rule has a promql_expr_test;
#   3. promtool test rules on the unit tests here (*.test.yml);
#   4. the checks themselves: promtool must reject every file under broken/
#      (*.rules.yml with check rules, *.test.yml with test rules), with output
#      that contains the file's "# expect:" line.
# Needs promtool (exit 77 without it). Runs from any directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The rules beside this script (CTest's RINGSYNC_SOURCE_DIR is the same tree).
cd "$here/../../.."
rules_dir=dashboards/rules
tests=tests/dashboards/rules

if ! command -v promtool >/dev/null; then
  echo "test-rules: promtool not found; skipping (Debian/Ubuntu: apt-get install prometheus)"
  exit 77
fi
echo "test-rules: $(promtool --version 2>&1 | head -1)"

failed=0
fail() { echo "FAIL: $*"; failed=1; }

shopt -s nullglob
rule_files=("$rules_dir"/*.rules.yml)
test_files=("$tests"/*.test.yml)
broken=("$tests"/broken/*)
shopt -u nullglob
((${#rule_files[@]})) || fail "no rule files ($rules_dir/*.rules.yml)"
((${#test_files[@]})) || fail "no unit tests ($tests/*.test.yml)"
((${#broken[@]})) || fail "no broken inputs ($tests/broken/)"

echo "== promtool check rules"
promtool check rules "${rule_files[@]}" || fail "promtool check rules found problems (above)"

echo "== every alert is complete and tested, every recording rule tested"
# Each alert's block runs from its "- alert:" line to the next rule or group.
incomplete=$(awk '
  function finish() {
    if (alert == "") return
    for (i = 1; i <= 5; i++) if (!(want[i] in seen)) print alert ": no " want[i]
    alert = ""; delete seen
  }
  BEGIN { split("for: severity: summary: description: runbook:", want, " ") }
  /^ *- (alert|record|name):/ { finish() }
  /^ *- alert:/ { alert = $3; next }
  alert != "" { for (i = 1; i <= 5; i++) if ($1 == want[i]) seen[want[i]] = 1 }
  END { finish() }
' "${rule_files[@]}")
[[ -z $incomplete ]] || fail "incomplete alerts:"$'\n'"$incomplete"
# "alertname: X" followed by "exp_alerts: []" is a case where X does not fire,
# by "exp_alerts:" and a list, a case where it fires.
cases=$(awk '
  $1 == "alertname:" { name = $2; next }
  name != "" && $1 == "exp_alerts:" { print name, ($2 == "[]" ? "quiet" : "fires"); name = "" }
' "${test_files[@]}" | sort -u)
while read -r alert; do
  for kind in fires quiet; do
    grep -qx "$alert $kind" <<<"$cases" || fail "$alert has no unit test where it $kind" \
                                                 "(alertname: $alert, exp_alerts in $tests/*.test.yml)"
  done
done < <(sed -n 's/^ *- alert: *//p' "${rule_files[@]}")
while read -r record; do
  grep -qE "^ *- expr: $record\$" "${test_files[@]}" ||
    fail "recording rule $record has no promql_expr_test (- expr: $record in $tests/*.test.yml)"
done < <(sed -n 's/^ *- record: *//p' "${rule_files[@]}")

echo "== promtool test rules"
promtool test rules "${test_files[@]}" || fail "promtool test rules failed (above)"

echo "== promtool rejects the broken inputs"
for input in "${broken[@]}"; do
  expect=$(sed -n 's/^# expect: //p' "$input")
  case $input in
    *.rules.yml) command=(promtool check rules "$input") ;;
    *.test.yml) command=(promtool test rules "$input") ;;
    *) fail "$input is neither *.rules.yml nor *.test.yml"; continue ;;
  esac
  if [[ -z $expect ]]; then
    fail "$input has no '# expect:' line"
  elif out=$("${command[@]}" 2>&1); then
    echo "$out"
    fail "${command[*]} accepted $input"
  elif grep -qF -- "$expect" <<<"$out"; then
    echo "rejected as expected: $input: $(grep -F -- "$expect" <<<"$out" | head -1 | sed 's/^ *//')"
  else
    echo "$out"
    fail "${command[*]} rejected $input, but its output does not contain \"$expect\""
  fi
done

if ((failed)); then
  echo "test-rules: FAILED"
  exit 1
fi
echo "test-rules: all checks passed"
