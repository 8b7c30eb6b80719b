// Validates Kubernetes manifests against the API schemas, offline, the way
// `kubectl apply --validate=strict` would: types, required keys, enums,
// formats (int32, quantity, int-or-string) and unknown keys, which are errors.
//
// The schemas come from the npm packages kubernetes-models (built-in kinds)
// and @kubernetes-models/prometheus-operator (PodMonitor). They ship each
// schema compiled into an Ajv validator, not as JSON, and the validators do
// not reject unknown keys. So every document is validated as a tree of
// proxies: at each object, the keys the compiled schema looks up are its
// properties, and a key in the document it never looked up is unknown. An
// object the schema enumerates (labels, resources: a map) takes any key; one
// whose schema declares no properties at all (RawExtension) is free-form.
//
// usage: node validate.mjs [--tree DIR] [--rendered LABEL FILE] [--mutate FILE] [FILE...]
//   --tree DIR   every *.yaml under DIR; kustomization.yaml files are skipped,
//                and the files they name as patches are checked as patches
//                (partial documents: required keys not enforced)
//   --rendered   a multi-document file made by `kubectl kustomize`, named LABEL
//   --mutate     tests this checker on FILE's (valid) documents: a key added to
//                any typed object, or a list put in place of any scalar, must
//                be rejected at that place
// Exit status: 0 when every document is valid, 1 otherwise.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { LineCounter, parseAllDocuments, isMap, isSeq, isPair } from "yaml";

// apiVersion group -> the package holding its models.
const packages = {
  "": "kubernetes-models/v1",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator/monitoring.coreos.com",
};
const packageOf = (group, version) =>
  group === "" ? packages[""] : `${packages[group] ?? `kubernetes-models/${group}`}/${version}`;

async function validatorFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
  if (!/^[A-Za-z][A-Za-z0-9]*$/.test(kind)) return null;
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (!/^[a-z0-9.-]*$/.test(group) || !/^v[0-9a-z]+$/.test(version ?? "")) return null;
  if (group === "" && version !== "v1") return null;
  try {
    const model = (await import(`${packageOf(group, version)}/${kind}`))[kind];
    if (model?.apiVersion !== apiVersion || model?.kind !== kind) return null;
    return model.prototype.validate;
  } catch {
    return null;
  }
}

// A copy of the document in which every object records the keys read from it.
function traced(value, path, objects) {
  if (Array.isArray(value)) return value.map((v, i) => traced(v, [...path, i], objects));
  if (value === null || typeof value !== "object") return value;
  const target = {};
  for (const [k, v] of Object.entries(value)) target[k] = traced(v, [...path, k], objects);
  const info = { path, keys: Object.keys(value), read: new Set(), enumerated: false };
  objects.push(info);
  return new Proxy(target, {
    get(t, k) {
      if (typeof k === "string") info.read.add(k);
      return t[k];
    },
    has(t, k) {
      if (typeof k === "string") info.read.add(k);
      return k in t;
    },
    ownKeys(t) {
      info.enumerated = true;
      return Reflect.ownKeys(t);
    },
  });
}

function closest(word, candidates) {
  const distance = (a, b) => {
    const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) d[0][j] = j;
    for (let i = 1; i <= a.length; i++)
      for (let j = 1; j <= b.length; j++)
        d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    return d[a.length][b.length];
  };
  let best = null;
  for (const c of candidates) {
    const n = distance(word.toLowerCase(), c.toLowerCase());
    if (n <= Math.max(2, Math.floor(word.length / 4)) && (!best || n < best.n)) best = { c, n };
  }
  return best?.c;
}

const pointer = (path) => "/" + path.map((s) => String(s).replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
const unpointer = (p) => (p === "" ? [] : p.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~")));
const describe = (v) => (v === null ? "null" : Array.isArray(v) ? "a list" : `${typeof v} ${JSON.stringify(v)}`);

function valueAt(data, path) {
  let v = data;
  for (const s of path) v = v?.[s];
  return v;
}

// The problems of one document: [{path, key, message}].
async function check(data, { patch, objects = [] }) {
  const problems = [];
  if (data === null || typeof data !== "object" || Array.isArray(data))
    return [{ path: [], key: "", message: "is not a mapping (a Kubernetes object)" }];
  const validate = await validatorFor(data.apiVersion, data.kind);
  if (!validate)
    return [{ path: ["kind"], key: "kind",
              message: `no schema for "kind" ${data.kind} in apiVersion ${data.apiVersion} ` +
                       "(misspelt, or a kind whose models package validate.mjs does not load)" }];
  if (!patch && typeof data.metadata?.name !== "string")
    problems.push({ path: ["metadata"], key: "name", message: 'missing required key "name"' });

  let errors = [];
  try {
    validate.call(traced(data, [], objects));
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    errors = e.errors;
  }
  // One line per place: a oneOf (int-or-string) reports each branch's type too.
  const byPath = new Map();
  for (const err of errors) {
    if (err.keyword === "required" && patch) continue;
    const key = err.keyword === "required" ? `${err.instancePath}\0${err.params.missingProperty}` : err.instancePath;
    if (!byPath.has(key)) byPath.set(key, []);
    byPath.get(key).push(err);
  }
  for (const group of byPath.values()) {
    const path = unpointer(group[0].instancePath);
    if (group[0].keyword === "required") {
      const key = group[0].params.missingProperty;
      problems.push({ path, key, message: `missing required key "${key}"` });
      continue;
    }
    const key = String(path.at(-1) ?? "");
    const types = group.filter((e) => e.keyword === "type").map((e) => e.params.type);
    const others = group.filter((e) => !["type", "oneOf", "anyOf"].includes(e.keyword));
    const got = describe(valueAt(data, path));
    // In a oneOf, a value of one branch's type that fails its format gets
    // the other branches' type errors too: the format is the message.
    const branches = group.some((e) => ["oneOf", "anyOf"].includes(e.keyword));
    if (types.length && !(branches && others.length)) problems.push({ path, key, message: `"${key}" must be ${types.join(" or ")}, not ${got}` });
    for (const e of others) {
      const what = e.keyword === "enum" ? `must be one of ${e.params.allowedValues.join(", ")}` : e.message;
      problems.push({ path, key, message: `"${key}" ${what}, not ${got}` });
    }
  }
  for (const o of objects) {
    if (o.enumerated || o.read.size === 0) continue;  // a map, or free-form
    for (const k of o.keys) {
      if (o.read.has(k)) continue;
      const hint = closest(k, o.read);
      problems.push({ path: [...o.path, k], key: k,
                      message: `unknown key "${k}"` + (hint ? ` (did you mean "${hint}"?)` : "") });
    }
  }
  return problems;
}

// The line of the node at path (the key itself for a map entry).
function lineOf(doc, path, lineCounter) {
  let node = doc.contents;
  let at = node?.range?.[0];
  for (const s of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && String(p.key?.value ?? p.key) === String(s));
      if (!pair) break;
      at = pair.key?.range?.[0] ?? at;
      node = pair.value;
    } else if (isSeq(node)) {
      node = node.items[Number(s)];
      at = node?.range?.[0] ?? at;
    } else break;
  }
  return at === undefined ? undefined : lineCounter.linePos(at).line;
}

let documents = 0;
let failures = 0;

async function checkFile(file, { label, patch = false, lines = true }) {
  const lineCounter = new LineCounter();
  let docs;
  try {
    // YAML 1.1, as kubectl reads it: `yes` is a boolean, 0755 an octal.
    docs = parseAllDocuments(readFileSync(file, "utf8"), { lineCounter, version: "1.1", uniqueKeys: true });
  } catch (e) {
    console.log(`${label}: cannot read: ${e.message}`);
    failures++;
    return;
  }
  if (!Array.isArray(docs)) docs = [docs];
  let index = 0;
  for (const doc of docs) {
    index++;
    if (doc.errors.length) {
      for (const e of doc.errors) console.log(`${label}:${e.linePos?.[0]?.line ?? "?"}: YAML: ${e.message}`);
      failures++;
      continue;
    }
    const data = doc.toJS({ maxAliasCount: 100 });
    if (data === null || data === undefined) continue;  // an empty document
    documents++;
    const name = `${data?.kind ?? "?"}/${data?.metadata?.name ?? "?"}`;
    for (const p of await check(data, { patch })) {
      const line = lines ? lineOf(doc, p.path, lineCounter) : undefined;
      const where = line === undefined ? `${label} (document ${index})` : `${label}:${line}`;
      console.log(`${where}: ${name}: ${pointer(p.path)}: ${p.message}`);
      failures++;
    }
  }
}

function yamlFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...yamlFiles(path));
    else if (/\.ya?ml$/.test(entry)) out.push(path);
  }
  return out;
}

function patchesOf(kustomization) {
  const text = readFileSync(kustomization, "utf8");
  const docs = parseAllDocuments(text);
  const k = (Array.isArray(docs) ? docs[0] : docs)?.toJS() ?? {};
  const paths = [
    ...(k.patches ?? []).map((p) => p?.path).filter(Boolean),
    ...(k.patchesStrategicMerge ?? []).filter((p) => typeof p === "string"),
  ];
  return paths.map((p) => resolve(dirname(kustomization), p));
}

// Every typed object gets an unknown key, every scalar becomes a list: each
// change must be reported at its own place.
async function mutate(file) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"), { version: "1.1" }).map((d) => d.toJS());
  let tried = 0;
  const missed = [];
  const reportedAt = (problems, path) => problems.some((p) => pointer(p.path) === pointer(path));
  for (const data of docs.filter((d) => d)) {
    const objects = [];
    if ((await check(data, { patch: false, objects })).length) {
      missed.push(`${file}: ${data.kind}/${data.metadata?.name} is not valid to begin with`);
      continue;
    }
    const leaves = [];
    const walk = (v, path) => {
      if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i]));
      else if (v !== null && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, [...path, k]);
      else leaves.push(path);
    };
    walk(data, []);
    const typed = objects.filter((o) => !o.enumerated && o.read.size > 0).map((o) => [...o.path, "zzNotAKey"]);
    const scalars = leaves.filter((path) => path.length > 1 || !["apiVersion", "kind"].includes(path[0]));
    for (const [path, change] of [...typed.map((p) => [p, "key"]), ...scalars.map((p) => [p, "type"])]) {
      const copy = structuredClone(data);
      let o = copy;
      for (const s of path.slice(0, -1)) o = o[s];
      o[path.at(-1)] = change === "key" ? 1 : [o[path.at(-1)]];
      tried++;
      if (!reportedAt(await check(copy, { patch: false }), path))
        missed.push(`${file}: ${data.kind}/${data.metadata?.name}: ${pointer(path)}: ` +
                    (change === "key" ? "an unknown key" : "a list instead of a scalar") + " was accepted");
    }
  }
  for (const m of missed) console.log(m);
  console.log(`validate.mjs --mutate: ${tried} change(s) to ${file}: ` +
              (missed.length ? `${missed.length} not caught` : "every one rejected"));
  return missed.length === 0;
}

const args = process.argv.slice(2);
let files = 0;
while (args.length) {
  const arg = args.shift();
  if (arg === "--tree") {
    const dir = args.shift();
    const all = yamlFiles(dir);
    const isKustomization = (f) => /(^|\/)kustomization\.ya?ml$/.test(f);
    const patches = new Set(all.filter(isKustomization).flatMap(patchesOf));
    for (const f of all.filter((f) => !isKustomization(f))) {
      files++;
      await checkFile(f, { label: relative(process.cwd(), f), patch: patches.has(resolve(f)) });
    }
  } else if (arg === "--mutate") {
    if (!(await mutate(args.shift()))) process.exit(1);
    process.exit(0);
  } else if (arg === "--rendered") {
    const label = args.shift();
    files++;
    await checkFile(args.shift(), { label: `${label} (rendered)`, lines: false });
  } else {
    files++;
    await checkFile(arg, { label: relative(process.cwd(), arg) || arg });
  }
}
console.log(`validate.mjs: ${documents} document(s) in ${files} file(s): ` +
            (failures ? `${failures} problem(s)` : "all valid"));
process.exit(failures ? 1 : 0);
