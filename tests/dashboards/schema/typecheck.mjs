// Type-checks dashboard JSON against Grafana's types: each file becomes a
// TypeScript module
//
//   import type { Dashboard } from '@grafana/schema';
//   import type { Json, RingsyncDashboardJson } from './dashboard-types';
//   export const d = <the file's JSON, verbatim> satisfies RingsyncDashboardJson;
//   export const grafana: Json<Dashboard> = d;
//
// and `tsc --strict --noEmit` checks them all. `satisfies` keeps TypeScript's
// excess-property check on every nested object literal, so a misspelt key is
// an error, not an ignored extra; the last line checks the same value against
// Grafana's own Dashboard type as it stands. The JSON starts on the module's
// first line, so tsc's line numbers are the file's.
//
//   typecheck([{ file, text, type? }], workDir) -> [{ file, line, column, asGrafana, message }]
// type: the type in dashboard-types.ts to check against, RingsyncDashboardJson
// by default (RingsyncPanelJson for a single panel).
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, 'node_modules', 'typescript', 'bin', 'tsc');

export function typecheck(inputs, workDir) {
  mkdirSync(workDir, { recursive: true });
  // Modules outside this folder find the npm packages through a link.
  symlinkSync(join(here, 'node_modules'), join(workDir, 'node_modules'), 'dir');
  copyFileSync(join(here, 'dashboard-types.ts'), join(workDir, 'dashboard-types.ts'));
  writeFileSync(join(workDir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true,
      noEmit: true,
      exactOptionalPropertyTypes: true,
      target: 'es2022',
      module: 'esnext',
      moduleResolution: 'bundler',
      types: [],
      // Grafana's own declaration files are not ours to check: the dashboards
      // are still checked against every type they declare.
      skipLibCheck: true,
    },
    include: ['*.ts'],
  }, null, 2));

  const modules = new Map(); // module name -> { file, jsonLines, prefix }
  inputs.forEach(({ file, text, type = 'RingsyncDashboardJson' }, n) => {
    const module = `d${n}-${basename(file).replace(/[^A-Za-z0-9_-]/g, '_').replace(/\.json$/, '')}.ts`;
    const json = text.trimEnd();
    const prefix = 'export const d = ';
    const lines = json.split('\n');
    const dashboard = type === 'RingsyncDashboardJson';
    const source = [
      `${prefix}${json} satisfies ${type};`,
      ...(dashboard ? ['export const grafana: Json<Dashboard> = d;', "import type { Dashboard } from '@grafana/schema';"] : []),
      `import type { Json, ${type} } from './dashboard-types';`,
      '',
    ].join('\n');
    writeFileSync(join(workDir, module), source);
    modules.set(module, { file, jsonLines: lines.length, prefix: prefix.length });
  });

  const run = spawnSync(process.execPath, [tsc, '-p', workDir, '--strict', '--noEmit', '--pretty', 'false'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (run.error) throw run.error;
  const diagnostics = [];
  let last = null;
  for (const line of `${run.stdout}${run.stderr}`.split('\n')) {
    const m = /^(.*?)\((\d+),(\d+)\): (error|warning) (TS\d+): (.*)$/.exec(line);
    if (m) {
      const module = modules.get(basename(m[1]));
      const l = Number(m[2]);
      const c = Number(m[3]);
      last = module
        ? {
          file: module.file,
          line: l <= module.jsonLines ? l : null,
          column: l === 1 ? Math.max(1, c - module.prefix) : c,
          asGrafana: l > module.jsonLines,
          message: `${m[5]} ${m[6]}`,
        }
        : { file: relative(process.cwd(), m[1]), line: l, column: c, message: `${m[5]} ${m[6]}` };
      diagnostics.push(last);
    } else if (line.trim() && last) {
      last.message += ` / ${line.trim()}`;
    } else if (line.trim()) {
      diagnostics.push({ file: null, line: null, column: null, message: line.trim() });
    }
  }
  if (run.status !== 0 && diagnostics.length === 0) {
    diagnostics.push({ file: null, line: null, column: null, message: `tsc exited with status ${run.status} and said nothing` });
  }
  return diagnostics;
}
