/**
 * The package as a user gets it (part of issue 17): `npm pack` (whose `prepack` builds dist/; here the
 * build CI made is packed as it is), installed into a fresh project, imported from an ESM and a CJS script,
 * every subpath (`laurel/otel` and `laurel/testing` with their optional peers installed: `laurel/testing` and
 * its `node` and `jest` adapters import no test framework; `laurel/testing/vitest` needs vitest and is left
 * out). Skipped without dist/ (a plain `npm test` on a fresh clone).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = existsSync(join(root, 'dist', 'index.js'));
const SUBPATHS = ['laurel', 'laurel/memory', 'laurel/http', 'laurel/postgres', 'laurel/redis', 'laurel/otel', 'laurel/testing', 'laurel/testing/node', 'laurel/testing/jest'];

it.skipIf(!built)('the packed tarball installs into a fresh project and every subpath imports from ESM and CJS', { timeout: 240_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'laurel-pack-'));
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: root, stdio: 'pipe' });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  expect(tarball).toBeDefined();
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, version: '1.0.0' }));
  execFileSync('npm', ['install', `./${tarball}`, '@opentelemetry/api', 'fast-check', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: dir, stdio: 'pipe', timeout: 200_000 });
  writeFileSync(
    join(dir, 'esm.mjs'),
    `const out = {};\nfor (const p of ${JSON.stringify(SUBPATHS)}) out[p] = Object.keys(await import(p)).length;\nconst { createEngine, defineConfig } = await import('laurel');\nconst e = createEngine({ config: defineConfig({ metrics: [{ key: 'm', name: 'M' }] }) });\nout.total = (await e.recordEvent('m', { user: { id: 'u' }, value: 2 })).total;\nconsole.log(JSON.stringify(out));\n`,
  );
  writeFileSync(join(dir, 'cjs.cjs'), `const out = {};\nfor (const p of ${JSON.stringify(SUBPATHS)}) out[p] = Object.keys(require(p)).length;\nconsole.log(JSON.stringify(out));\n`);
  const esm = JSON.parse(execFileSync(process.execPath, ['esm.mjs'], { cwd: dir, encoding: 'utf8' })) as Record<string, number>;
  const cjs = JSON.parse(execFileSync(process.execPath, ['cjs.cjs'], { cwd: dir, encoding: 'utf8' })) as Record<string, number>;
  for (const p of SUBPATHS) {
    expect(esm[p], `ESM ${p}`).toBeGreaterThan(0);
    expect(cjs[p], `CJS ${p}`).toBeGreaterThan(0);
  }
  expect(esm.total).toBe(2);
  // Every example and the rules ship (README links them); the generated API reference (docs/api) does not.
  const installed = join(dir, 'node_modules', 'laurel');
  expect(readdirSync(join(installed, 'examples')).sort()).toEqual(readdirSync(join(root, 'examples')).sort());
  expect(existsSync(join(installed, 'docs', 'rules.md'))).toBe(true);
  expect(existsSync(join(installed, 'docs', 'api'))).toBe(false);
});

/**
 * The types half of issue 17's "must show": in a fresh project with the installed tarball, `tsc --strict`
 * (`module: nodenext`, the TypeScript of this repository) compiles a module that declares its configurations
 * first (`as const` and `as const satisfies ConfigInput`), and rejects one whose metric key and points-system
 * key are misspelt, naming each.
 */
it.skipIf(!built)('a strict nodenext TypeScript project keeps the configuration keys: a misspelt key does not compile', { timeout: 240_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'laurel-types-'));
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: root, stdio: 'pipe' });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  expect(tarball).toBeDefined();
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch-types', private: true, version: '1.0.0' }));
  execFileSync('npm', ['install', `./${tarball}`, '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: dir, stdio: 'pipe', timeout: 200_000 });
  const configs = [
    `import { createEngine, defineConfig, isLaurelErrorCode, type ConfigInput } from 'laurel';`,
    `const asConst = { metrics: [{ key: 'lessons', name: 'Lessons' }], pointsSystems: [{ key: 'heart', name: 'Hearts' }] } as const;`,
    `const checked = {`,
    `  metrics: [{ key: 'quizzes', name: 'Quizzes' }],`,
    `  pointsSystems: [{ key: 'heart', name: 'Hearts', maxPoints: 5, triggers: [{ key: 'cost', type: 'metric', metricKey: 'quizzes', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }] }],`,
    `} as const satisfies ConfigInput;`,
    `const a = createEngine({ config: defineConfig(asConst) });`,
    `const b = createEngine({ config: defineConfig(checked) });`,
  ];
  writeFileSync(
    join(dir, 'good.mts'),
    [
      ...configs,
      `const ra = await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });`,
      `const hearts: number | undefined = ra.points.heart?.total;`,
      `try { await b.recordEvent('quizzes', { user: { id: 'u1' }, value: 1 }); }`,
      `catch (e) { if (isLaurelErrorCode(e, 'INSUFFICIENT_POINTS')) console.log(e.total, e.required); }`,
      `console.log(hearts);`,
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'bad.mts'),
    [...configs, `await a.recordEvent('lesons', { user: { id: 'u1' }, value: 1 });`, `const rb = await b.recordEvent('quizzes', { user: { id: 'u1' }, value: 1 });`, `console.log(rb.points.hert, isLaurelErrorCode);`, ''].join('\n'),
  );
  const tsc = (file: string) =>
    spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', file], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  const good = tsc('good.mts');
  expect(good.stdout + good.stderr).toBe('');
  expect(good.status).toBe(0);
  const bad = tsc('bad.mts');
  expect(bad.status).not.toBe(0);
  const errors = bad.stdout.split('\n').filter((l) => l.includes('error TS'));
  expect(errors).toHaveLength(2);
  expect(errors[0]).toMatch(/^bad\.mts\(9,\d+\): error TS2345: .*"lesons"/);
  expect(errors[1]).toMatch(/^bad\.mts\(11,\d+\): error TS2551: Property 'hert' does not exist/);
});
