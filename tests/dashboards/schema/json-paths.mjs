// Where each value of a JSON text is: maps a JSON path (panels[2].gridPos) to
// its line, and a line and column (as tsc reports them) back to the deepest
// path there, so every message names both.
//
//   const where = jsonPaths(text);
//   where.lineOf('panels[2].gridPos')  -> 41
//   where.pathAt(41, 7)                -> 'panels[2].gridPos'

export function jsonPaths(text) {
  const spans = []; // { path, start, end } for every value, and its key if any
  let i = 0;
  const ws = () => { while (i < text.length && /\s/.test(text[i])) i++; };
  const string = () => {
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
  };
  const join = (path, key) =>
    typeof key === 'number' ? `${path}[${key}]`
      : /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? (path ? `${path}.${key}` : key)
        : `${path}[${JSON.stringify(key)}]`;

  const value = (path, from) => {
    ws();
    const start = from ?? i;
    if (text[i] === '{') {
      i++;
      ws();
      while (i < text.length && text[i] !== '}') {
        const keyStart = i;
        string();
        const key = JSON.parse(text.slice(keyStart, i));
        ws();
        i++; // ':'
        value(join(path, key), keyStart);
        ws();
        if (text[i] === ',') { i++; ws(); }
      }
      i++;
    } else if (text[i] === '[') {
      i++;
      ws();
      for (let n = 0; i < text.length && text[i] !== ']'; n++) {
        value(join(path, n));
        ws();
        if (text[i] === ',') { i++; ws(); }
      }
      i++;
    } else if (text[i] === '"') {
      string();
    } else {
      while (i < text.length && !/[\s,\]}]/.test(text[i])) i++;
    }
    spans.push({ path, start, end: i });
  };
  value('');

  const lineStarts = [0];
  for (let p = 0; p < text.length; p++) if (text[p] === '\n') lineStarts.push(p + 1);
  const lineAt = (offset) => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid] <= offset) lo = mid; else hi = mid - 1;
    }
    return lo + 1;
  };
  const byPath = new Map(spans.map((s) => [s.path, s]));

  return {
    lineOf(path) {
      // The nearest existing ancestor when the path itself is absent (a missing key).
      for (let p = path; ; p = p.replace(/(\.[^.[\]]+|\[[^\]]*\])$/, '')) {
        const span = byPath.get(p);
        if (span) return lineAt(span.start);
        if (!p) return 1;
      }
    },
    pathAt(line, column) {
      const offset = (lineStarts[line - 1] ?? 0) + column - 1;
      let best = null;
      for (const s of spans) {
        if (s.start <= offset && offset < s.end && (!best || s.end - s.start <= best.end - best.start)) best = s;
      }
      return best ? best.path : '';
    },
  };
}
