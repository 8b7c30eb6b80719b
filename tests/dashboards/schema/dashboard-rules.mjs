// The checks of a ringsync dashboard that Grafana's types cannot express:
// what a panel must say (description, unit, thresholds), where it sits (grid),
// which variables exist, and what its queries read (only the metrics and
// recording rules of known-metrics.txt, with labels they have, filtered by the
// dashboard's variables).
//
//   rules(dashboard, { uid, known, schemaVersion, datasourceUid }) -> [{ path, message }]
import { readFileSync } from 'node:fs';
import { scan, variablesIn } from './promql.mjs';

const GRID_COLUMNS = 24;
const ALWAYS_LABELS = ['job', 'instance'];
// Grafana's own variables a query may use.
const GLOBAL_VARIABLES = new Set(['__interval', '__interval_ms', '__rate_interval', '__range',
  '__range_s', '__range_ms', '__from', '__to', '__dashboard', '__org', '__user']);
// Functions that read a counter's range as a counter.
const COUNTER_FUNCTIONS = new Set(['rate', 'irate', 'increase', 'resets']);
// Grafana unit ids these dashboards may use (a subset of Grafana's
// valueFormats categories); custom units ("suffix:...") are allowed too.
const UNITS = new Set(['none', 'short', 'string', 'percent', 'percentunit', 'bytes', 'decbytes',
  'bits', 'decbits', 'Bps', 'binBps', 'bps', 'binbps', 's', 'ms', 'µs', 'ns', 'dtdurations',
  'ops', 'reqps', 'cps', 'iops', 'wps', 'rps', 'hertz', 'watt', 'celsius']);
const CUSTOM_UNIT = /^(suffix|prefix|si|count|currency|time|bool):/;

/** known-metrics.txt -> Map(name -> { kind, labels }), histograms expanded. */
export function loadKnownMetrics(file) {
  const known = new Map();
  for (const [n, raw] of readFileSync(file, 'utf8').split('\n').entries()) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const [name, kind, labels, extra] = line.split(/\s+/);
    if (!['counter', 'gauge', 'histogram', 'recording'].includes(kind) || !labels || extra) {
      throw new Error(`${file}:${n + 1}: expected NAME KIND LABELS, got ${JSON.stringify(raw)}`);
    }
    const list = labels === '-' ? [] : labels.split(',');
    if (kind === 'histogram') {
      known.set(`${name}_bucket`, { kind: 'counter', labels: [...list, 'le'] });
      known.set(`${name}_sum`, { kind: 'counter', labels: list });
      known.set(`${name}_count`, { kind: 'counter', labels: list });
      known.set(name, { kind: 'histogram', labels: list });
    } else {
      known.set(name, { kind, labels: list });
    }
  }
  return known;
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const nonEmpty = (v) => typeof v === 'string' && v.trim() !== '';

export function rules(d, { uid, known, schemaVersion, datasourceUid }) {
  const problems = [];
  const problem = (path, message) => problems.push({ path, message });
  if (!isObject(d)) {
    problem('', 'a dashboard is a JSON object');
    return problems;
  }

  // The dashboard itself.
  if (d.uid !== uid) problem('uid', `the uid must be the file's name, ${JSON.stringify(uid)} (links and provisioning rely on it)`);
  if (!nonEmpty(d.title)) problem('title', 'a dashboard needs a title');
  if (!nonEmpty(d.description)) problem('description', 'a dashboard needs a description');
  if (!Number.isInteger(d.schemaVersion) || d.schemaVersion < 39 || d.schemaVersion > schemaVersion) {
    problem('schemaVersion', `schemaVersion must be an integer from 39 to ${schemaVersion} (@grafana/schema's current one)`);
  }

  // Variables: datasource, job, instance always; queries may use only these and Grafana's own.
  const list = Array.isArray(d.templating?.list) ? d.templating.list : [];
  const variables = new Map();
  list.forEach((v, i) => {
    if (!isObject(v)) return;
    if (variables.has(v.name)) problem(`templating.list[${i}].name`, `variable ${v.name} is defined twice`);
    variables.set(v.name, { ...v, index: i });
  });
  const variablePath = (name, key) => `templating.list[${variables.get(name).index}]${key ? `.${key}` : ''}`;
  const expectVariable = (name, want) => {
    const v = variables.get(name);
    if (!v) {
      problem('templating.list', `no variable ${name} (every ringsync dashboard has datasource, job and instance)`);
      return;
    }
    for (const [key, value] of Object.entries(want)) {
      if (v[key] !== value) problem(variablePath(name, key), `variable ${name}: ${key} must be ${JSON.stringify(value)}`);
    }
  };
  expectVariable('datasource', { type: 'datasource', query: 'prometheus' });
  const current = variables.get('datasource')?.current;
  if (current !== undefined && current?.value !== datasourceUid) {
    problem(variablePath('datasource', 'current'), `variable datasource must start at the provisioned datasource, uid ${JSON.stringify(datasourceUid)}`);
  }
  expectVariable('job', { type: 'query', query: 'label_values(ringsync_build_info, job)' });
  expectVariable('instance', {
    type: 'query', query: 'label_values(ringsync_build_info{job=~"$job"}, instance)',
    multi: true, includeAll: true, allValue: '.*',
  });
  const hasJobId = variables.has('job_id');
  if (hasJobId) expectVariable('job_id', { type: 'query', multi: true, includeAll: true, allValue: '.*' });
  for (const [name, v] of variables) {
    if (v.type !== 'query') continue;
    const m = /^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$/.exec(typeof v.query === 'string' ? v.query : '');
    if (!m) {
      problem(variablePath(name, 'query'), `variable ${name}: the query must read label_values(SELECTOR, LABEL)`);
      continue;
    }
    if (v.datasource?.uid !== '${datasource}') problem(variablePath(name, 'datasource'), `variable ${name} must read the \${datasource} variable`);
    checkExpr(m[1], variablePath(name, 'query'), { labelsRead: [m[2]], filters: false });
  }

  // Panels.
  const panels = Array.isArray(d.panels) ? d.panels : [];
  if (panels.length === 0) problem('panels', 'a dashboard needs panels');
  const ids = new Map();
  const placed = [];
  panels.forEach((p, i) => {
    const at = `panels[${i}]`;
    if (!isObject(p)) return;
    const name = nonEmpty(p.title) ? JSON.stringify(p.title) : `#${i}`;
    if (!nonEmpty(p.title)) problem(`${at}.title`, 'a panel needs a title');
    if (!nonEmpty(p.description)) problem(`${at}.description`, `panel ${name} needs a description: what it shows and what to do about it`);
    if (!Number.isInteger(p.id) || p.id < 1) problem(`${at}.id`, `panel ${name} needs a positive integer id`);
    else if (ids.has(p.id)) problem(`${at}.id`, `panel ${name} has the id ${p.id} of panel ${ids.get(p.id)}`);
    else ids.set(p.id, name);

    const g = p.gridPos;
    if (isObject(g) && ['x', 'y', 'w', 'h'].every((k) => Number.isInteger(g[k]))) {
      if (g.x < 0 || g.y < 0 || g.w < 1 || g.h < 1 || g.x + g.w > GRID_COLUMNS) {
        problem(`${at}.gridPos`, `panel ${name} lies outside the ${GRID_COLUMNS}-column grid`);
      }
      for (const other of placed) {
        const o = other.g;
        if (g.x < o.x + o.w && o.x < g.x + g.w && g.y < o.y + o.h && o.y < g.y + g.h) {
          problem(`${at}.gridPos`, `panel ${name} overlaps panel ${other.name}`);
        }
      }
      placed.push({ g, name });
    } else {
      problem(`${at}.gridPos`, `panel ${name} needs gridPos {x, y, w, h} in whole grid units`);
    }

    const defaults = p.fieldConfig?.defaults;
    const unit = defaults?.unit;
    if (!nonEmpty(unit)) problem(`${at}.fieldConfig.defaults.unit`, `panel ${name} needs a unit (Bps, s, percentunit, ...; none for a plain number)`);
    else if (!UNITS.has(unit) && !CUSTOM_UNIT.test(unit)) problem(`${at}.fieldConfig.defaults.unit`, `panel ${name}: ${JSON.stringify(unit)} is not a Grafana unit id (bytes/s is "Bps", seconds "s", a 0..1 ratio "percentunit")`);
    const steps = defaults?.thresholds?.steps;
    if (!Array.isArray(steps) || steps.length === 0) {
      problem(`${at}.fieldConfig.defaults.thresholds`, `panel ${name} needs thresholds (a base step at least)`);
    } else {
      if (steps[0]?.value !== null) problem(`${at}.fieldConfig.defaults.thresholds.steps[0].value`, `panel ${name}: the first threshold step is the base, value null`);
      for (let s = 2; s < steps.length; s++) {
        if (!(steps[s]?.value > steps[s - 1]?.value)) problem(`${at}.fieldConfig.defaults.thresholds.steps[${s}].value`, `panel ${name}: threshold values must increase`);
      }
    }

    const targets = Array.isArray(p.targets) ? p.targets : [];
    if (targets.length === 0) problem(`${at}.targets`, `panel ${name} needs a query`);
    const refIds = new Set();
    targets.forEach((t, j) => {
      const tat = `${at}.targets[${j}]`;
      if (!isObject(t)) return;
      if (refIds.has(t.refId)) problem(`${tat}.refId`, `panel ${name}: refId ${t.refId} is used twice`);
      refIds.add(t.refId);
      if (!nonEmpty(t.expr)) {
        problem(`${tat}.expr`, `panel ${name}: a query needs an expr`);
        return;
      }
      const labelsRead = [...(t.legendFormat ?? '').matchAll(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)].map((m) => m[1]);
      checkExpr(t.expr, `${tat}.expr`, { labelsRead, legendPath: `${tat}.legendFormat`, filters: true });
    });
  });

  // Annotations: Prometheus queries like the panels'.
  const annotations = Array.isArray(d.annotations?.list) ? d.annotations.list : [];
  annotations.forEach((a, i) => {
    const expr = a?.target?.expr;
    if (!nonEmpty(expr)) {
      problem(`annotations.list[${i}].target.expr`, 'an annotation needs a query (target.expr)');
      return;
    }
    const labelsRead = [a.titleFormat, a.textFormat].flatMap((f) =>
      [...(f ?? '').matchAll(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)].map((m) => m[1]))
      .concat((a.tagKeys ?? '').split(',').map((s) => s.trim()).filter(Boolean));
    checkExpr(expr, `annotations.list[${i}].target.expr`, { labelsRead, filters: true });
  });

  return problems;

  // One PromQL expression: syntax, metrics, labels, variables, filters.
  function checkExpr(expr, path, { labelsRead, legendPath, filters }) {
    const q = scan(expr);
    for (const e of q.errors) problem(path, `${e} in ${JSON.stringify(expr)}`);
    for (const name of q.variables) {
      if (!variables.has(name) && !GLOBAL_VARIABLES.has(name)) problem(path, `$${name} is not a variable of this dashboard`);
    }
    const available = new Set(ALWAYS_LABELS);
    let instanceFiltered = false;
    let allKnown = true;
    for (const s of q.selectors) {
      const has = (label) => s.matchers.some((m) => m.label === label && m.op === '=~' && variablesIn(m.value).includes(label));
      if (filters && has('instance')) instanceFiltered = true;
      if (filters && !has('job')) problem(path, `${s.name ?? 'a selector'} must be filtered by job=~"$job"`);
      if (s.name === null) {
        problem(path, 'a selector must name its metric');
        allKnown = false;
        continue;
      }
      const metric = known.get(s.name);
      if (!metric) {
        problem(path, `unknown metric ${s.name} (not in known-metrics.txt, the daemon's metrics and recording rules)`);
        allKnown = false;
        continue;
      }
      if (metric.kind === 'histogram') {
        problem(path, `${s.name} is a histogram: read ${s.name}_bucket, _sum or _count`);
        continue;
      }
      metric.labels.forEach((l) => available.add(l));
      const labels = new Set([...ALWAYS_LABELS, ...metric.labels, '__name__']);
      for (const m of s.matchers) {
        if (!labels.has(m.label)) problem(path, `${s.name} has no label ${m.label} (it has ${[...labels].filter((l) => l !== '__name__').join(', ')})`);
        const multi = variablesIn(m.value).some((v) => variables.get(v)?.multi || variables.get(v)?.includeAll);
        if (multi && (m.op === '=' || m.op === '!=')) problem(path, `${s.name}{${m.label}${m.op}"${m.value}"}: a multi-value variable needs =~ or !~`);
      }
      if (metric.kind === 'counter' && !s.range) problem(path, `${s.name} is a counter: read it through rate() or increase() over a range`);
      if (metric.kind !== 'counter' && s.range && COUNTER_FUNCTIONS.has(s.func)) problem(path, `${s.func}() of ${s.name}, which is a ${metric.kind}, not a counter`);
      if (filters && hasJobId && metric.labels.includes('job_id') && !has('job_id')) problem(path, `${s.name} must be filtered by job_id=~"$job_id"`);
    }
    if (filters && q.selectors.length && !instanceFiltered) problem(path, 'the query must be filtered by instance=~"$instance"');
    if (!allKnown) return; // the labels of an unknown metric are unknown
    for (const label of q.groupingLabels) {
      if (!available.has(label) && label !== 'le') problem(path, `grouping by ${label}, which none of the query's metrics has`);
    }
    for (const label of labelsRead) {
      if (!available.has(label)) problem(legendPath ?? path, `{{${label}}}: none of the query's metrics has the label ${label}`);
    }
  }
}
