// The published package's API is documented: every export of pkg/webdelegate.d.ts (class,
// function, enum, interface, type alias) and every public member of an exported class and enum
// has a doc comment (the `///` docs wasm-bindgen copies from src/web/); no runtime export of
// webdelegate.js is missing from the .d.ts unless src/ hides it on purpose (`skip_typescript`);
// no benchmark fixture (`*Bench`, the bench build's) is exported; and docs/api/ is what
// `npm run docs:api` builds from this .d.ts now. Needs `npm run build:pkg`; no browser.
//
// Oracle: TypeScript's own compiler (the pinned `typescript`, TypeDoc's peer): the checker's
// exports of the module, and each symbol's getDocumentationComment(), which is what an editor
// shows on hover. The checker is first run on a small .d.ts with known gaps, so a check that
// cannot fail would fail there.
//
// Not checked: the properties of interfaces (the options and result shapes), which their
// interface's doc describes in prose; wasm-bindgen's own glue, which it writes without docs
// (`free()` and `[Symbol.dispose]()` of every class; the `InitInput`, `InitOutput` and
// `SyncInitInput` types of `init`).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DTS = path.join(ROOT, 'pkg', 'webdelegate.d.ts');
const JS = path.join(ROOT, 'pkg', 'webdelegate.js');
const GLUE_EXPORTS = new Set(['InitInput', 'InitOutput', 'SyncInitInput']);
const GLUE_MEMBERS = new Set(['free', '[Symbol.dispose]']);

function requirePkg() {
  assert.ok(existsSync(DTS), 'pkg/webdelegate.d.ts is missing: run npm run build:pkg');
}

/** The text of `symbol`'s doc comment, as the checker reads it ('' when it has none). */
function docOf(checker, symbol) {
  return ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
}

/**
 * `{ exports, undocumented }` of the .d.ts at `file`: the names it exports, and each export or
 * member (`Class.member`, `Enum.member`) without a doc, wasm-bindgen's glue left out.
 */
function audit(file) {
  const program = ts.createProgram([file], {
    noEmit: true,
    noResolve: true,
    skipLibCheck: true,
    lib: ['lib.esnext.d.ts', 'lib.dom.d.ts'],
    types: [],
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const module = checker.getSymbolAtLocation(source);
  assert.ok(module, `${file} is not a module`);
  const exports = [];
  const undocumented = [];
  for (const symbol of checker.getExportsOfModule(module)) {
    const name = symbol.getName();
    exports.push(name);
    if (GLUE_EXPORTS.has(name)) continue;
    if (!docOf(checker, symbol)) undocumented.push(name);
    for (const declaration of symbol.declarations ?? []) {
      if (ts.isClassDeclaration(declaration)) {
        for (const member of declaration.members) {
          const modifiers = ts.getCombinedModifierFlags(member);
          if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
          if (ts.isConstructorDeclaration(member)) {
            const documented = ts.getJSDocCommentsAndTags(member).some((doc) => ts.getTextOfJSDocComment(doc.comment)?.trim());
            if (!documented) undocumented.push(`${name}.constructor`);
            continue;
          }
          if (!member.name) continue;
          const memberName = member.name.getText(source);
          if (GLUE_MEMBERS.has(memberName)) continue;
          const memberSymbol = checker.getSymbolAtLocation(member.name);
          // A getter and its setter are one property: documented when either carries the doc.
          if (!memberSymbol || !docOf(checker, memberSymbol)) undocumented.push(`${name}.${memberName}`);
        }
      } else if (ts.isEnumDeclaration(declaration)) {
        for (const member of declaration.members) {
          const memberSymbol = checker.getSymbolAtLocation(member.name);
          if (!memberSymbol || !docOf(checker, memberSymbol)) undocumented.push(`${name}.${member.name.getText(source)}`);
        }
      }
    }
  }
  return { exports, undocumented: [...new Set(undocumented)] };
}

/** Names webdelegate.js exports at run time (`export class|function|const NAME`, `export { a, b as c }`). */
function runtimeExports(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.JS);
  const names = [];
  for (const statement of source.statements) {
    const exported = ts.canHaveModifiers(statement) && ts.getModifiers(statement)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      for (const element of statement.exportClause.elements) names.push(element.name.text);
    } else if (exported && (ts.isClassDeclaration(statement) || ts.isFunctionDeclaration(statement)) && statement.name) {
      names.push(statement.name.text);
    } else if (exported && ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) names.push(declaration.name.getText(source));
    }
  }
  return names;
}

/** The JS names of the items src/ marks `skip_typescript` (hidden from the .d.ts on purpose). */
function hiddenInSource() {
  const hidden = new Set();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.rs')) {
        const text = readFileSync(full, 'utf8');
        for (const m of text.matchAll(/#\[wasm_bindgen\(([^)]*)\bskip_typescript\b[^)]*\)\]\s*pub\s+(?:struct|fn|enum)\s+(\w+)/g)) {
          const jsName = /js_name\s*=\s*"?(\w+)"?/.exec(m[1])?.[1];
          hidden.add(jsName ?? m[2]);
        }
      }
    }
  };
  walk(path.join(ROOT, 'src'));
  return hidden;
}

test('the checker finds what a .d.ts with known gaps lacks (it can fail)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'api-docs-'));
  try {
    const file = path.join(dir, 'sample.d.ts');
    writeFileSync(
      file,
      `/** Documented. */
export class Good {
  free(): void;
  [Symbol.dispose](): void;
  private constructor();
  /** A documented method. */
  run(): void;
  /** A documented getter. */
  get size(): number;
  set size(value: number);
}
export class Bare {
  /** The constructor. */
  constructor(x: number);
  method(): void;
  get value(): number;
}
export class Made {
  constructor();
}
/** A documented function. */
export function fine(): void;
export function bare(): void;
/** Codes. */
export enum Code {
  /** Documented. */
  Ok = 0,
  Missing = 1,
}
export interface Shape { x: number; }
/** Documented alias. */
export type Alias = string;
export type InitInput = string;
`,
    );
    const { exports, undocumented } = audit(file);
    assert.deepEqual(exports.sort(), ['Alias', 'Bare', 'Code', 'Good', 'InitInput', 'Made', 'Shape', 'bare', 'fine'].sort());
    assert.deepEqual(undocumented.sort(), ['Bare', 'Bare.method', 'Bare.value', 'Code.Missing', 'Made', 'Made.constructor', 'Shape', 'bare'].sort());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every export of pkg/webdelegate.d.ts and every member of its classes and enums has a doc', () => {
  requirePkg();
  const { exports, undocumented } = audit(DTS);
  assert.ok(exports.length >= 40, `only ${exports.length} exports found: ${exports}`);
  for (const name of ['Embedder', 'Generator', 'Module', 'Delegate', 'ProgramBuilder', 'ready', 'useCpuThreads', 'ErrorCode', 'default']) {
    assert.ok(exports.includes(name), `${name} is not exported`);
  }
  assert.deepEqual(undocumented, [], `without a doc comment (add a /// doc to its Rust item in src/web/): ${undocumented.join(', ')}`);
});

test('the .d.ts declares every runtime export, except those src/ hides with skip_typescript', () => {
  requirePkg();
  const declared = new Set(audit(DTS).exports);
  const hidden = hiddenInSource();
  const missing = runtimeExports(JS).filter((name) => !declared.has(name) && !hidden.has(name));
  assert.deepEqual(missing, [], `exported by webdelegate.js without a type or doc: ${missing.join(', ')}`);
});

test('the published package exports no benchmark fixture', () => {
  requirePkg();
  const benches = [...audit(DTS).exports, ...runtimeExports(JS)].filter((name) => /Bench$/.test(name));
  assert.deepEqual(benches, [], 'benchmark classes belong in the bench build only (cargo feature bench, npm run build:pkg:bench)');
});

test('docs/api is what npm run docs:api builds from the package now', () => {
  requirePkg();
  const out = mkdtempSync(path.join(os.tmpdir(), 'api-docs-out-'));
  try {
    execFileSync('bash', [path.join(ROOT, 'scripts', 'build-api-docs.sh')], { cwd: ROOT, env: { ...process.env, API_DOCS_OUT: out }, stdio: 'pipe' });
    const files = (dir, base = dir) =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name), base) : [path.relative(base, path.join(dir, e.name))])).sort();
    const committed = path.join(ROOT, 'docs', 'api');
    const want = files(out);
    assert.ok(want.includes('README.md') && want.some((f) => f.startsWith('classes')), `unexpected output: ${want}`);
    const stale = 'docs/api is stale: run npm run build:pkg && npm run docs:api and commit docs/api';
    assert.deepEqual(existsSync(committed) ? files(committed) : [], want, stale);
    for (const file of want) {
      assert.equal(readFileSync(path.join(committed, file), 'utf8'), readFileSync(path.join(out, file), 'utf8'), `${stale} (${file} differs)`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
