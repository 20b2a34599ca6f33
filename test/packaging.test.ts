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
