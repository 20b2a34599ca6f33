/**
 * The package as a user gets it (part of issue 17): `npm pack` (whose `prepack` builds dist/; here the
 * build CI made is packed as it is), installed into a fresh project, imported from an ESM and a CJS script,
 * every subpath (`laurel/otel` with its optional peer installed). `laurel/testing` is left out: it imports
 * vitest at its top level (issue 17). Skipped without dist/ (a plain `npm test` on a fresh clone).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = existsSync(join(root, 'dist', 'index.js'));
const SUBPATHS = ['laurel', 'laurel/memory', 'laurel/http', 'laurel/postgres', 'laurel/redis', 'laurel/otel'];

it.skipIf(!built)('the packed tarball installs into a fresh project and every subpath imports from ESM and CJS', { timeout: 240_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'laurel-pack-'));
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: root, stdio: 'pipe' });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  expect(tarball).toBeDefined();
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, version: '1.0.0' }));
  execFileSync('npm', ['install', `./${tarball}`, '@opentelemetry/api', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: dir, stdio: 'pipe', timeout: 200_000 });
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
});
