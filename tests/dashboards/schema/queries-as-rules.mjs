// Writes every query of the given dashboards (panel targets, annotations,
// label_values() selectors of variables) as a recording rule, so that
// `promtool check rules` parses each one with Prometheus's own PromQL parser.
// Grafana's variables are replaced by values a query could have: $job by a
// job name, $instance and $job_id by ".*" (All), $__rate_interval by 1m.
//
// usage: node queries-as-rules.mjs OUT.yml FILE.json...
// The rules file is JSON, which YAML readers take as is; each rule's labels
// say which dashboard, panel and query it comes from.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const [out, ...files] = process.argv.slice(2);
if (!out || files.length === 0) {
  console.error('usage: node queries-as-rules.mjs OUT.yml FILE.json...');
  process.exit(2);
}

const values = {
  job: 'ringsyncd', instance: '.*', job_id: '.*',
  __rate_interval: '1m', __interval: '15s', __interval_ms: '15000', __range: '5m', __range_s: '300', __range_ms: '300000',
};
const substitute = (expr) =>
  expr.replace(/\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\[\[([A-Za-z0-9_]+)\]\]|\$([A-Za-z0-9_]+)/g,
    (all, a, b, c) => values[a ?? b ?? c] ?? all);

const rules = [];
const add = (file, where, expr) => {
  if (typeof expr !== 'string' || !expr.trim()) return;
  rules.push({
    record: `dashboard_query_${rules.length}`,
    expr: substitute(expr),
    labels: { dashboard: basename(file), query: where },
  });
};
for (const file of files) {
  const d = JSON.parse(readFileSync(file, 'utf8'));
  (d.panels ?? []).forEach((p, i) =>
    (p.targets ?? []).forEach((t, j) => add(file, `panels[${i}].targets[${j}] ${p.title ?? ''}`, t.expr)));
  (d.annotations?.list ?? []).forEach((a, i) => add(file, `annotations.list[${i}]`, a.target?.expr));
  (d.templating?.list ?? []).forEach((v, i) => {
    const m = /^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)$/.exec(typeof v.query === 'string' ? v.query : '');
    if (m) add(file, `templating.list[${i}] ${v.name}`, m[1]);
  });
}
writeFileSync(out, `${JSON.stringify({ groups: [{ name: 'dashboard-queries', rules }] }, null, 2)}\n`);
console.log(`queries-as-rules: ${rules.length} queries of ${files.length} dashboard(s) in ${out}`);
