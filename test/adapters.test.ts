/**
 * The conformance suite's test-framework adapters from the BUILT package (dist/, as CI builds it before the
 * tests): a scratch project whose `node_modules/laurel` links to this package runs the suite against the
 * memory store under `node --test` (ESM, `laurel/testing/node`) and jest (CJS, `laurel/testing/jest`) as
 * child processes, and each must report every check passed (the four atomicity checks skipped under node:test,
 * passed with a "not applicable" note under jest, which has no run-time skip); the same against a broken
 * store must report failures. Skipped without dist/ (a plain `npm test` on a fresh clone).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeConformanceChecks } from '../src/testing/index.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = ['testing.js', 'testing.cjs', 'testing-node.js', 'testing-jest.cjs'].every((f) => existsSync(join(root, 'dist', f)));
const checks = storeConformanceChecks.length;
const atomicity = storeConformanceChecks.filter((c) => c.name.startsWith('atomicity (fault injection)')).length;

/** A memory store whose countEntries counts `value <= max` (a bug the suite must catch). */
const broken = (createMemoryStore: string) => `() => { const s = ${createMemoryStore}(); return { ...s, countEntries: (i, r) => s.countEntries(i, r && r.max !== undefined ? { ...r, max: r.max + 1e-9 } : r) }; }`;

describe.skipIf(!built)('conformance adapters from the built package', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'laurel-adapters-'));
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(root, join(dir, 'node_modules', 'laurel'), 'dir');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, version: '1.0.0', jest: { testEnvironment: 'node', transform: {} } }));
    for (const [name, factory] of [['ok', 'createMemoryStore'], ['broken', broken('createMemoryStore')]] as const) {
      writeFileSync(
        join(dir, `${name}.node.mjs`),
        `import { createMemoryStore } from 'laurel/memory';\nimport { describeStoreConformance } from 'laurel/testing/node';\ndescribeStoreConformance('memory', ${factory});\n`,
      );
      writeFileSync(
        join(dir, `${name}.test.cjs`),
        `const { createMemoryStore } = require('laurel/memory');\nconst { describeStoreConformance } = require('laurel/testing/jest');\ndescribeStoreConformance('memory', ${factory});\n`,
      );
    }
    // `laurel/testing` itself loads from CJS and ESM without any test framework.
    writeFileSync(join(dir, 'core.cjs'), `const t = require('laurel/testing');\nconsole.log(JSON.stringify({ checks: t.storeConformanceChecks.length, run: typeof t.runStoreConformance, register: typeof t.registerStoreConformance }));\n`);
  }, 60_000);
  afterAll(() => {
    if (!dir) return;
    // The link first (rm never follows links, but the package must be out of reach before anything is removed).
    unlinkSync(join(dir, 'node_modules', 'laurel'));
    rmSync(dir, { recursive: true, force: true });
  });

  it('laurel/testing loads from CJS with no test framework', () => {
    const out = JSON.parse(execFileSync(process.execPath, ['core.cjs'], { cwd: dir, encoding: 'utf8' })) as Record<string, unknown>;
    expect(out).toEqual({ checks, run: 'function', register: 'function' });
  });

  /** Runs a file under `node --test` (TAP) and reads its summary counts. */
  const nodeTest = (file: string) => {
    const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', file], { cwd: dir, encoding: 'utf8', timeout: 180_000 });
    const count = (name: string) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(r.stdout)?.[1] ?? NaN);
    return { status: r.status, stdout: r.stdout, tests: count('tests'), pass: count('pass'), fail: count('fail'), skipped: count('skipped') };
  };

  it('node:test (laurel/testing/node, ESM): every check of the memory store passes, the atomicity checks are skipped', () => {
    const r = nodeTest('ok.node.mjs');
    expect(r.status, r.stdout.slice(-3000)).toBe(0);
    expect([r.tests, r.pass, r.fail, r.skipped]).toEqual([checks, checks - atomicity, 0, atomicity]);
    expect(r.stdout).toMatch(/# SKIP the store calls no fault point/);
  }, 200_000);

  it('node:test reports the failures of a broken store', () => {
    const r = nodeTest('broken.node.mjs');
    expect(r.status).not.toBe(0);
    expect(r.fail).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/countEntries/);
  }, 200_000);

  /** Runs a test file under jest (the repository's jest) and reads its JSON report. */
  const jest = (file: string) => {
    const bin = join(root, 'node_modules', 'jest', 'bin', 'jest.js');
    const r = spawnSync(process.execPath, [bin, '--rootDir', dir, '--ci', '--json', file], { cwd: dir, encoding: 'utf8', timeout: 180_000 });
    const report = JSON.parse(r.stdout) as { numTotalTests: number; numPassedTests: number; numFailedTests: number; success: boolean };
    return { status: r.status, stderr: r.stderr, ...report };
  };

  it('jest (laurel/testing/jest, CJS): every check of the memory store passes, the atomicity checks noted not applicable', () => {
    const r = jest('ok.test.cjs');
    expect(r.status, r.stderr.slice(-3000)).toBe(0);
    expect([r.numTotalTests, r.numPassedTests, r.numFailedTests]).toEqual([checks, checks, 0]);
    expect(r.stderr.match(/not applicable: atomicity \(fault injection\)/g)?.length).toBe(atomicity);
  }, 200_000);

  it('jest reports the failures of a broken store', () => {
    const r = jest('broken.test.cjs');
    expect(r.status).not.toBe(0);
    expect(r.numFailedTests).toBeGreaterThan(0);
    expect(r.success).toBe(false);
  }, 200_000);
});
