// The benchmark report keys, documented: every key in bench/results/example.json is listed in
// bench/README.md, and every key a suite in bench/suites/ writes is in example.json (and
// example.json holds no key that no suite writes). Reads files only: no browser, no build.
//
// Keys a suite writes are found in its source the way the suites write them: assignments to
// the report object, `result.key = ...`, `out.key = ...`, `result[`key_${x}`] = ...` (quoted
// and template strings inside the brackets), and the top-level keys of object literals given
// as `result = {...}`, `Object.assign(out, {...})` or `return {...}` (`key: ...` and
// `[`key_${x}`]: ...`). A template key (`${...}` in it) must match at least one key of
// example.json, a `${...}` standing for any run of [a-z0-9_]. Report keys are snake_case with
// at least one underscore (bench/run.mjs's contract); other identifiers are ignored.
//
// bench/README.md lists keys in backticks, with shell-style brace alternatives for families:
// `cpu_mt_infer_ms_b{1,8}_{ours,ort}` lists four keys.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SUITES = path.join(ROOT, 'bench', 'suites');
const KEY = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/;

/** Source without comments (block comments, and `//` comments not inside a string or URL). */
function stripComments(src) {
  return src
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .split('\n')
    .map((line) => line.replace(/(^|[^:'"`\\])\/\/.*$/, '$1'))
    .join('\n');
}

/** The top-level keys of the object literal whose `{` is at `src[open]`. */
function literalKeys(src, open) {
  const keys = [];
  let depth = 0;
  let expectKey = true;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1;
      i = j;
      expectKey = false;
      continue;
    }
    if (c === '{' || c === '[' || c === '(') {
      if (depth === 1 && c === '[' && expectKey) {
        const m = /^\[\s*(`[^`]*`|'[^']*')\s*\]\s*:/.exec(src.slice(i));
        if (m) {
          keys.push(m[1].slice(1, -1));
          i += m[0].length - 1;
          expectKey = false;
          continue;
        }
      }
      depth += 1;
      continue;
    }
    if (c === '}' || c === ']' || c === ')') {
      depth -= 1;
      if (depth === 0) return keys;
      continue;
    }
    if (depth !== 1) continue;
    if (c === ',') {
      expectKey = true;
    } else if (expectKey && /[A-Za-z_$]/.test(c)) {
      const m = /^([A-Za-z_$][\w$]*)\s*(:?)/.exec(src.slice(i));
      if (m[2]) keys.push(m[1]);
      i += m[1].length - 1;
      expectKey = false;
    } else if (!/\s/.test(c)) {
      expectKey = false;
    }
  }
  return keys;
}

/** {literal: Set of keys, templates: Set of template keys} a suite's source writes. */
export function suiteKeys(source) {
  const src = stripComments(source);
  const literal = new Set();
  const templates = new Set();
  const add = (key) => {
    if (key.includes('${')) templates.add(key);
    else if (KEY.test(key)) literal.add(key);
  };
  for (const m of src.matchAll(/\b(?:result|out)\.([a-z][a-z0-9_]*)\s*=(?![=>])/g)) add(m[1]);
  for (const m of src.matchAll(/\b(?:result|out)\[([^\]\n]+)\]\s*=(?![=>])/g)) {
    for (const s of m[1].matchAll(/'([^']*)'|`([^`]*)`/g)) add(s[1] ?? s[2]);
  }
  for (const m of src.matchAll(/(?:\b(?:result|out)\s*=\s*|Object\.assign\(\s*(?:result|out)\s*,\s*|\breturn\s+)\{/g)) {
    for (const key of literalKeys(src, m.index + m[0].length - 1)) add(key);
  }
  return { literal, templates };
}

/** A template key as a regular expression: each `${...}` stands for any run of [a-z0-9_]. */
export function templatePattern(template) {
  const parts = template.split(/\$\{[^}]*\}/).map((s) => s.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&'));
  return new RegExp(`^${parts.join('[a-z0-9_]*')}$`);
}

/** Shell-style brace expansion: `a_{b,c}_d` -> ['a_b_d', 'a_c_d'] (nested and repeated). */
export function expandBraces(text) {
  const open = text.indexOf('{');
  if (open < 0) return [text];
  let depth = 0;
  let close = -1;
  const commas = [];
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth += 1;
    else if (text[i] === '}') {
      depth -= 1;
      if (depth === 0) { close = i; break; }
    } else if (text[i] === ',' && depth === 1) commas.push(i);
  }
  if (close < 0) return [text];
  const bounds = [open, ...commas, close];
  const options = bounds.slice(0, -1).map((b, i) => text.slice(b + 1, bounds[i + 1]));
  const rest = expandBraces(text.slice(close + 1));
  return options.flatMap((o) => expandBraces(text.slice(0, open) + o)).flatMap((head) => rest.map((tail) => head + tail));
}

/** Every key bench/README.md lists: its backticked spans of key characters, braces expanded. */
export function documentedKeys(markdown) {
  const keys = new Set();
  for (const m of markdown.matchAll(/`([a-z0-9_{},]+)`/g)) {
    for (const key of expandBraces(m[1])) if (KEY.test(key)) keys.add(key);
  }
  return keys;
}

function readSuites() {
  return readdirSync(SUITES)
    .filter((f) => f.endsWith('.mjs'))
    .sort()
    .map((file) => ({ file, ...suiteKeys(readFileSync(path.join(SUITES, file), 'utf8')) }));
}

const example = () => JSON.parse(readFileSync(path.join(ROOT, 'bench', 'results', 'example.json'), 'utf8'));
const readme = () => readFileSync(path.join(ROOT, 'bench', 'README.md'), 'utf8');

test('the key scanner reads the ways the suites write keys', () => {
  const src = `
    // result.commented_out = 1;
    const result = { plain_key: 1, camelCase: 2, [\`computed_\${name}\`]: 3 };
    result.dot_key = 4; out[\`bracket_\${b}_ms\`] = 5; result[s ? 'either_key' : \`or_\${s}\`] = 6;
    if (out.read_only === 1) Object.assign(out, { assigned_key: page({ not_a_key: 1 }), shorthand });
    return { returned_key: 7 };`;
  const { literal, templates } = suiteKeys(src);
  assert.deepEqual([...literal].sort(), ['assigned_key', 'dot_key', 'either_key', 'plain_key', 'returned_key']);
  assert.deepEqual([...templates].sort(), ['bracket_${b}_ms', 'computed_${name}', 'or_${s}']);
  assert.ok(templatePattern('ort_webgpu${suffix}_ran').test('ort_webgpu_ran'));
  assert.ok(templatePattern('ort_webgpu${suffix}_ran').test('ort_webgpu_opt_ran'));
  assert.ok(!templatePattern('llm_ttft_ms_${name}').test('llm_ready_ms_ours_cpu'));
  assert.deepEqual(expandBraces('a_{b,c}_d{1,2}'), ['a_b_d1', 'a_b_d2', 'a_c_d1', 'a_c_d2']);
  assert.deepEqual(expandBraces('ort_webgpu{,_opt}_ran'), ['ort_webgpu_ran', 'ort_webgpu_opt_ran']);
  assert.deepEqual([...documentedKeys('`npm run bench`, `x_{a,b}` and `BENCH_FILTER`')], ['x_a', 'x_b']);
});

test('every suite writes keys the scanner finds', () => {
  for (const { file, literal, templates } of readSuites()) {
    assert.ok(literal.size + templates.size > 0, `${file}: no report keys found (is its report object named result or out?)`);
  }
});

test('bench/results/example.json is one flat object of finite numbers', () => {
  const ex = example();
  assert.equal(typeof ex, 'object');
  assert.ok(!Array.isArray(ex));
  for (const [key, value] of Object.entries(ex)) {
    assert.ok(KEY.test(key), `${key} is a snake_case key`);
    assert.ok(typeof value === 'number' && Number.isFinite(value), `${key} = ${value} is a finite number`);
  }
});

test('every key a suite writes is in bench/results/example.json', () => {
  const keys = Object.keys(example());
  const missing = [];
  for (const { file, literal, templates } of readSuites()) {
    for (const key of literal) if (!keys.includes(key)) missing.push(`${file}: ${key}`);
    for (const template of templates) {
      if (!keys.some((k) => templatePattern(template).test(k))) missing.push(`${file}: ${template} (no key matches)`);
    }
  }
  assert.deepEqual(missing, [], 'keys the suites write, missing from bench/results/example.json');
});

test('every key in bench/results/example.json is written by a suite', () => {
  const suites = readSuites();
  const written = (key) => suites.some(({ literal, templates }) => literal.has(key) || [...templates].some((t) => templatePattern(t).test(key)));
  assert.deepEqual(Object.keys(example()).filter((k) => !written(k)), [], 'keys no suite writes');
});

test('every key in bench/results/example.json is documented in bench/README.md', () => {
  const documented = documentedKeys(readme());
  assert.deepEqual(Object.keys(example()).filter((k) => !documented.has(k)), [], 'keys missing from bench/README.md');
});
