/**
 * The reference SQLite adapter (test/sqlite/store.ts) passes the whole conformance suite through the vitest
 * adapter, the atomicity checks included (it calls the fault hook before each statement of its writes); its
 * injected bugs are measured by `npm run test:mutation` (test/sqlite/mutation.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { runConformanceCheck, storeConformanceChecks } from '../src/testing/index.js';
import { describeStoreConformance } from '../src/testing/vitest.js';
import { createSqliteStore, MUTANTS } from './sqlite/store.js';

const opened: { close(): void }[] = [];
afterAll(() => {
  for (const store of opened) store.close();
});

describeStoreConformance('sqlite (reference adapter, test/sqlite/store.ts)', ({ faults }) => {
  const store = createSqliteStore({ faults });
  opened.push(store);
  return store;
});

describe('the reference SQLite adapter', () => {
  it('gets the atomicity checks (it calls the fault hook) and passes them', async () => {
    const atomicity = storeConformanceChecks.filter((c) => c.name.startsWith('atomicity (fault injection)'));
    expect(atomicity.length).toBe(4);
    for (const check of atomicity) {
      expect(await runConformanceCheck(check, ({ faults }) => createSqliteStore({ faults })), check.name).toEqual({ status: 'passed' });
    }
  });

  it('without its fault hook, has the atomicity checks skipped as not applicable', async () => {
    const check = storeConformanceChecks.find((c) => c.name.startsWith('atomicity (fault injection): a commit '));
    expect(check).toBeDefined();
    const outcome = await runConformanceCheck(check!, () => createSqliteStore());
    expect(outcome.status).toBe('skipped');
  });

  it('a non-atomic commit is caught by the fault injection, naming the statement', async () => {
    const check = storeConformanceChecks.find((c) => c.name.startsWith('atomicity (fault injection): a commit '));
    const outcome = await runConformanceCheck(check!, ({ faults }) => createSqliteStore({ faults, mutant: 'commit-not-atomic' }));
    expect(outcome.status).toBe('failed');
    expect(String((outcome as { error: Error }).error.message)).toMatch(/failed at point \d+ of \d+ \(.+\), but changed/);
  });

  it('has at least 20 injected bugs', () => {
    expect(Object.keys(MUTANTS).length).toBeGreaterThanOrEqual(20);
  });
});
