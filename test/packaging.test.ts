import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import * as src from '../src/index.js';

const dist = new URL('../dist/index.cjs', import.meta.url);
const built = existsSync(dist);

// CI builds before it tests; a plain `npm test` on a fresh clone has no dist/ and skips these.
describe.skipIf(!built)('the built package (dist/)', () => {
  it('isLaurelError recognises errors from the CJS and the ESM copies alike', async () => {
    const cjs = createRequire(import.meta.url)(dist.pathname) as typeof src;
    const esm = (await import(new URL('../dist/index.js', import.meta.url).href)) as typeof src;
    const fromCjs = new cjs.NotFoundError('metric', 'x');
    const fromEsm = new esm.InsufficientPointsError('energy', 0, 1);
    expect(fromCjs).not.toBeInstanceOf(src.NotFoundError);
    for (const guard of [src.isLaurelError, cjs.isLaurelError, esm.isLaurelError]) {
      expect(guard(fromCjs)).toBe(true);
      expect(guard(fromEsm)).toBe(true);
      expect(guard(new Error('plain'))).toBe(false);
    }
    expect(src.isLaurelErrorCode(fromCjs, 'NOT_FOUND')).toBe(true);
  });

  it("the bundle keeps the core's mark of checked states: a state it returned is used as it is, sharing its records", async () => {
    // Bundlers' tree-shaking may drop a call whose result is unused as a pure allocation (step.ts, Checked.mark):
    // a state then came back unmarked, and every call copied and checked it again.
    const cjs = createRequire(import.meta.url)(dist.pathname) as typeof src;
    const esm = (await import(new URL('../dist/index.js', import.meta.url).href)) as typeof src;
    for (const lib of [cjs, esm]) {
      const config = lib.defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }] });
      const ctx = (at: string) => ({ now: new Date(at), newId: () => `id-${at}` });
      const first = lib.applyEvent(config, null, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, ctx('2026-01-05T10:00:00Z')).state;
      const next = lib.applyEvent(config, first, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, ctx('2026-01-05T11:00:00Z')).state;
      expect(Object.getPrototypeOf(next)).toBe(Object.prototype);
      expect(next.user).toBe(first.user);
      expect(next.metrics.lessons).toBe(2);
      // A new user's state and a later one are marked on different paths: both.
      const third = lib.applyEvent(config, next, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, ctx('2026-01-05T11:30:00Z')).state;
      expect(third.user).toBe(next.user);
      // A copy is checked again (its records copied): nothing it shares with the original is reused as is.
      const again = lib.applyEvent(config, { ...next }, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, ctx('2026-01-05T12:00:00Z')).state;
      expect(again.user).not.toBe(next.user);
    }
  });

  it('every subpath export resolves, ESM and CJS', async () => {
    const require = createRequire(import.meta.url);
    for (const entry of ['index', 'memory', 'testing', 'http', 'postgres', 'redis', 'otel']) {
      expect(existsSync(new URL(`../dist/${entry}.d.ts`, import.meta.url))).toBe(true);
      // `laurel/testing` too: it imports no test framework (its adapters are `laurel/testing/{vitest,jest,node}`).
      expect(Object.keys(require(new URL(`../dist/${entry}.cjs`, import.meta.url).pathname)).length).toBeGreaterThan(0);
      expect(Object.keys(await import(new URL(`../dist/${entry}.js`, import.meta.url).href)).length).toBeGreaterThan(0);
    }
  });
});
