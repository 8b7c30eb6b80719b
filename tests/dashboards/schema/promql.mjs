// Reads what a dashboard's checks need from a PromQL expression, without a
// full parser: the series selectors (metric name, label matchers, range, the
// function applied to them), the label lists of by/without/on/ignoring/group_*,
// the functions called and the Grafana variables used. Brackets must balance
// and strings must end; anything else is left to Prometheus.
//
//   scan(expr) -> { selectors: [{ name, matchers: [{ label, op, value }],
//                                 range, func }],
//                   groupingLabels: [label], functions: [name],
//                   variables: [name], errors: [message] }

const AGGREGATIONS = new Set([
  'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values',
  'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio',
]);

export const FUNCTIONS = new Set([
  'abs', 'absent', 'absent_over_time', 'acos', 'acosh', 'asin', 'asinh', 'atan', 'atanh',
  'avg_over_time', 'ceil', 'changes', 'clamp', 'clamp_max', 'clamp_min', 'cos', 'cosh',
  'count_over_time', 'day_of_month', 'day_of_week', 'day_of_year', 'days_in_month', 'deg',
  'delta', 'deriv', 'double_exponential_smoothing', 'exp', 'floor', 'histogram_avg',
  'histogram_count', 'histogram_fraction', 'histogram_quantile', 'histogram_stddev',
  'histogram_stdvar', 'histogram_sum', 'holt_winters', 'hour', 'idelta', 'increase', 'irate',
  'label_join', 'label_replace', 'last_over_time', 'ln', 'log10', 'log2', 'mad_over_time',
  'max_over_time', 'min_over_time', 'minute', 'month', 'pi', 'predict_linear',
  'present_over_time', 'quantile_over_time', 'rad', 'rate', 'resets', 'round', 'scalar', 'sgn',
  'sin', 'sinh', 'sort', 'sort_by_label', 'sort_by_label_desc', 'sort_desc', 'sqrt',
  'stddev_over_time', 'stdvar_over_time', 'sum_over_time', 'tan', 'tanh', 'time', 'timestamp',
  'vector', 'year',
]);

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right',
  'bool', 'offset', 'and', 'or', 'unless', 'atan2']);
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const MATCH_OPS = ['=~', '!~', '!=', '='];

// Grafana's variable syntaxes: $name, ${name}, ${name:format}, [[name]].
const VARIABLE = /\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]/g;

export function variablesIn(text) {
  return [...text.matchAll(VARIABLE)].map((m) => m[1] ?? m[2] ?? m[3]);
}

function tokenize(expr, errors) {
  const tokens = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i];
    if (/\s/.test(c)) { i++; continue; }
    if (c === '#') { while (i < expr.length && expr[i] !== '\n') i++; continue; }
    if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      let value = '';
      while (j < expr.length && expr[j] !== c) {
        if (expr[j] === '\\' && c !== '`') { value += expr[j + 1] ?? ''; j += 2; continue; }
        value += expr[j++];
      }
      if (j >= expr.length) { errors.push(`unterminated string at column ${i + 1}`); return tokens; }
      tokens.push({ kind: 'string', value });
      i = j + 1;
      continue;
    }
    const variable = /^(\$\{[A-Za-z0-9_]+(?::[^}]*)?\}|\$[A-Za-z0-9_]+|\[\[[A-Za-z0-9_]+\]\])/.exec(expr.slice(i));
    if (variable) { tokens.push({ kind: 'variable', value: variable[0] }); i += variable[0].length; continue; }
    const ident = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(expr.slice(i));
    if (ident) { tokens.push({ kind: 'ident', value: ident[0] }); i += ident[0].length; continue; }
    const number = /^(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?(?:ms|[smhdwy])?(?:[0-9]+(?:ms|[smhdwy]))*)/.exec(expr.slice(i));
    if (number && number[0].length) { tokens.push({ kind: 'number', value: number[0] }); i += number[0].length; continue; }
    const op = /^(=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}[\],:@])/.exec(expr.slice(i));
    if (op) { tokens.push({ kind: 'punct', value: op[0] }); i += op[0].length; continue; }
    errors.push(`unexpected character ${JSON.stringify(c)} at column ${i + 1}`);
    i++;
  }
  return tokens;
}

export function scan(expr) {
  const errors = [];
  const tokens = tokenize(expr, errors);
  const selectors = [];
  const groupingLabels = [];
  const functions = [];
  const frames = []; // open brackets: { bracket, func }
  const closing = { '(': ')', '{': '}', '[': ']' };
  const peek = (k) => tokens[k] ?? { kind: 'end', value: '' };
  const innermostFunc = () => {
    for (let f = frames.length - 1; f >= 0; f--) if (frames[f].bracket === '(') return frames[f].func;
    return null;
  };

  // Reads a parenthesised list of label names at tokens[k] ('('); returns the index after it.
  const labelList = (k, keyword) => {
    if (peek(k).value !== '(') {
      if (keyword === 'group_left' || keyword === 'group_right') return k; // the list is optional
      errors.push(`${keyword} needs a (label, ...) list`);
      return k;
    }
    k++;
    while (k < tokens.length && peek(k).value !== ')') {
      const t = peek(k);
      if (t.kind === 'ident') groupingLabels.push(t.value);
      else if (t.value !== ',') errors.push(`unexpected ${JSON.stringify(t.value)} in ${keyword} (...)`);
      k++;
    }
    if (peek(k).value !== ')') errors.push(`${keyword} (...) is not closed`);
    return k + 1;
  };

  // Reads {label op "value", ...} at tokens[k] ('{'); returns [matchers, index after].
  const matcherList = (k) => {
    const matchers = [];
    k++;
    while (k < tokens.length && peek(k).value !== '}') {
      const label = peek(k);
      const op = peek(k + 1);
      const value = peek(k + 2);
      if (label.kind !== 'ident' || !MATCH_OPS.includes(op.value) || value.kind !== 'string') {
        errors.push(`a label matcher must read label="value" (=, !=, =~ or !~), near ${JSON.stringify(label.value)}`);
        while (k < tokens.length && peek(k).value !== '}' && peek(k).value !== ',') k++;
      } else {
        matchers.push({ label: label.value, op: op.value, value: value.value });
        k += 3;
      }
      if (peek(k).value === ',') k++;
    }
    if (peek(k).value !== '}') errors.push('a label matcher list {...} is not closed');
    return [matchers, k + 1];
  };

  let k = 0;
  while (k < tokens.length) {
    const t = tokens[k];
    if (t.kind === 'ident' && LABEL_LISTS.has(t.value)) {
      k = labelList(k + 1, t.value);
      continue;
    }
    if (t.kind === 'ident' && peek(k + 1).value === '(' && !KEYWORDS.has(t.value)) {
      if (!FUNCTIONS.has(t.value) && !AGGREGATIONS.has(t.value)) errors.push(`unknown function ${t.value}()`);
      functions.push(t.value);
      frames.push({ bracket: '(', func: t.value });
      k += 2;
      continue;
    }
    if (t.kind === 'ident' && AGGREGATIONS.has(t.value) && (peek(k + 1).value === 'by' || peek(k + 1).value === 'without')) {
      // sum by (labels) (expr)
      functions.push(t.value);
      const after = labelList(k + 2, peek(k + 1).value);
      if (peek(after).value !== '(') errors.push(`${t.value} ${peek(k + 1).value} (...) needs its argument in (...)`);
      frames.push({ bracket: '(', func: t.value });
      k = after + 1;
      continue;
    }
    if ((t.kind === 'ident' && !KEYWORDS.has(t.value)) || (t.value === '{' && (k === 0 || peek(k - 1).kind !== 'ident'))) {
      // A series selector: name{matchers}[range]
      const name = t.kind === 'ident' ? t.value : null;
      let j = t.kind === 'ident' ? k + 1 : k;
      let matchers = [];
      if (peek(j).value === '{') [matchers, j] = matcherList(j);
      let range = null;
      if (peek(j).value === '[') {
        const start = j;
        while (j < tokens.length && peek(j).value !== ']') j++;
        if (peek(j).value !== ']') errors.push('a range [...] is not closed');
        range = tokens.slice(start + 1, j).map((x) => x.value).join('');
        j++;
      }
      selectors.push({ name, matchers, range, func: innermostFunc() });
      k = j;
      continue;
    }
    if (t.value === '(' || t.value === '[' || t.value === '{') {
      frames.push({ bracket: t.value, func: null });
    } else if (t.value === ')' || t.value === ']' || t.value === '}') {
      const open = frames.pop();
      if (!open || closing[open.bracket] !== t.value) {
        errors.push(`unbalanced ${JSON.stringify(t.value)}`);
        if (open) frames.push(open);
      } else if (t.value === ')' && open.func && AGGREGATIONS.has(open.func) &&
                 (peek(k + 1).value === 'by' || peek(k + 1).value === 'without')) {
        // sum (expr) by (labels)
        k = labelList(k + 2, peek(k + 1).value);
        continue;
      }
    }
    k++;
  }
  for (const open of frames) errors.push(`${JSON.stringify(open.bracket)} is not closed`);
  return { selectors, groupingLabels, functions, variables: variablesIn(expr), errors };
}
