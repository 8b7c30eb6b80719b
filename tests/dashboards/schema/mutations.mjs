// Tests the types on a valid dashboard: copies of it with one change each
// that Grafana would not read as meant, every one of which tsc must reject.
//   - an unknown key added to an object (a misspelt option is silently
//     ignored by Grafana), except in the maps keyed by field name that
//     transformations take;
//   - a list put in place of a scalar (a value of the wrong type).
// A copy the types accept shows a place they leave open. A change inside a
// panel is checked on that panel alone (as a RingsyncPanelJson), the others
// on the dashboard with its first panel only: same types, a tenth of the text.
//
//   mutations(dashboard) -> [{ path, change, text, type }]

// Objects whose keys are names the dashboard chooses (field names).
const FREE_FORM = /\.transformations\[\d+\]\.options\.(excludeByName|indexByName|renameByName|includeByName)$/;

const join = (path, key) => (typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key);

export function mutations(dashboard) {
  const out = [];
  const apply = (path, steps, change, edit) => {
    const inPanel = steps[0] === 'panels' && steps.length >= 2;
    const copy = inPanel
      ? structuredClone(dashboard.panels[steps[1]])
      : { ...structuredClone(dashboard), panels: structuredClone(dashboard.panels.slice(0, 1)) };
    let target = copy;
    for (const step of inPanel ? steps.slice(2) : steps) target = target[step];
    edit(target);
    out.push({
      path,
      change,
      text: `${JSON.stringify(copy, null, 2)}\n`,
      type: inPanel ? 'RingsyncPanelJson' : 'RingsyncDashboardJson',
    });
  };
  const walk = (value, path, steps) => {
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, join(path, i), [...steps, i]));
    } else if (value !== null && typeof value === 'object') {
      if (!FREE_FORM.test(path)) {
        apply(path, steps, 'an unknown key added', (o) => { o.unknownKeyAddedByTheTest = true; });
      }
      for (const [k, v] of Object.entries(value)) walk(v, join(path, k), [...steps, k]);
    } else {
      const parent = steps.slice(0, -1);
      const key = steps.at(-1);
      apply(path, parent, 'a list in place of the value', (o) => { o[key] = []; });
    }
  };
  walk(dashboard, '', []);
  return out;
}
