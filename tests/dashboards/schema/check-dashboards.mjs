// Checks Grafana dashboard files the way tests/dashboards/schema/test-dashboards.sh
// runs it:
//   1. JSON that parses;
//   2. Grafana's types: tsc --strict over each file wrapped as a typed
//      constant (typecheck.mjs, dashboard-types.ts);
//   3. what types cannot say (dashboard-rules.mjs): descriptions, units,
//      thresholds, the grid, the datasource/job/instance variables (the
//      datasource starting at the uid dashboards/provisioning provisions), and
//      queries that read only the metrics of known-metrics.txt, with their
//      labels, filtered by the variables.
// Every problem is one line: FILE:LINE: PATH: MESSAGE.
//
// usage: node check-dashboards.mjs FILE.json...
//        node check-dashboards.mjs --mutate FILE.json...
//   --mutate  tests the types on valid FILEs instead (mutations.mjs): every
//             copy with an unknown key or a wrongly typed value must fail tsc
// Exit status: 0 when every file passes, 1 when one does not, 2 on a usage error.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultDashboard } from '@grafana/schema';
import { jsonPaths } from './json-paths.mjs';
import { loadKnownMetrics, rules } from './dashboard-rules.mjs';
import { mutations } from './mutations.mjs';
import { typecheck } from './typecheck.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const mutate = process.argv[2] === '--mutate';
const files = process.argv.slice(mutate ? 3 : 2);
if (files.length === 0 || files.some((f) => f.startsWith('-'))) {
  console.error('usage: node check-dashboards.mjs [--mutate] FILE.json...');
  process.exit(2);
}
if (mutate) process.exit(checkMutations(files));

const known = loadKnownMetrics(join(here, 'known-metrics.txt'));
// The uid of the Prometheus datasource Grafana is provisioned with.
const provisioned = join(here, '..', '..', '..', 'dashboards', 'provisioning', 'datasources.yaml');
const datasourceUid = /^\s*uid:\s*(\S+)\s*$/m.exec(readFileSync(provisioned, 'utf8'))?.[1];
const schemaVersion = defaultDashboard.schemaVersion;
const problems = [];
const report = (file, line, path, message) =>
  problems.push(`${file}:${line ?? 1}: ${path || '(dashboard)'}: ${message}`);

const parsed = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    report(file, 1, '', `cannot read: ${e.message}`);
    continue;
  }
  let dashboard;
  try {
    dashboard = JSON.parse(text);
  } catch (e) {
    report(file, 1, '', `not JSON: ${e.message}`);
    continue;
  }
  parsed.push({ file, text, dashboard, where: jsonPaths(text) });
}

if (parsed.length) {
  const work = mkdtempSync(join(tmpdir(), 'ringsync-dashboards-'));
  try {
    const byFile = new Map(parsed.map((p) => [p.file, p]));
    const diagnostics = typecheck(parsed, work);
    // The check against Grafana's plain Dashboard type repeats what the
    // stricter one found; it speaks only when that one is silent.
    const strictFailed = new Set(diagnostics.filter((t) => !t.asGrafana).map((t) => t.file));
    for (const t of diagnostics) {
      const p = byFile.get(t.file);
      const message = t.message.length > 600 ? `${t.message.slice(0, 600)}…` : t.message;
      if (!p) {
        problems.push(`tsc: ${t.file ? `${t.file}:${t.line}: ` : ''}${message}`);
      } else if (t.asGrafana) {
        if (!strictFailed.has(t.file)) report(t.file, 1, '', `as Grafana's Dashboard type: ${message}`);
      } else {
        report(t.file, t.line, p.where.pathAt(t.line, t.column), message);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const uids = new Map();
for (const { file, dashboard, where } of parsed) {
  const uid = basename(file, '.json');
  if (uids.has(dashboard?.uid)) report(file, where.lineOf('uid'), 'uid', `the uid of ${uids.get(dashboard.uid)} too`);
  uids.set(dashboard?.uid, file);
  for (const { path, message } of rules(dashboard, { uid, known, schemaVersion, datasourceUid })) {
    report(file, where.lineOf(path), path, message);
  }
}

for (const p of problems) console.log(p);
if (problems.length) {
  console.log(`check-dashboards: ${problems.length} problem(s) in ${files.length} file(s)`);
  process.exit(1);
}
console.log(`check-dashboards: ${files.length} dashboard(s) pass (Grafana schema ${schemaVersion}, ${known.size} known series)`);

// --mutate: every mutation of every file must be rejected by tsc.
function checkMutations(inputs) {
  let accepted = 0;
  for (const file of inputs) {
    const copies = mutations(JSON.parse(readFileSync(file, 'utf8')));
    const work = mkdtempSync(join(tmpdir(), 'ringsync-dashboards-'));
    let rejected;
    try {
      const named = copies.map((c, n) => ({ ...c, file: `mutation-${n}.json` }));
      rejected = new Set(typecheck(named, work).filter((t) => !t.asGrafana).map((t) => t.file));
      for (const c of named) {
        if (rejected.has(c.file)) continue;
        accepted++;
        console.log(`${file}: ${c.path || '(dashboard)'}: ${c.change} was accepted: the types leave it open`);
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    console.log(`${file}: ${rejected.size} of ${copies.length} mutations rejected`);
  }
  return accepted ? 1 : 0;
}
