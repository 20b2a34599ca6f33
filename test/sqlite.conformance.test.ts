/**
 * The reference SQLite adapter (test/sqlite/store.ts) passes the whole conformance suite through the vitest
 * adapter, the atomicity checks included (it calls the fault hook before each statement of its writes) and the
 * tenancy checks (all but the outbox one: it has no outbox); its injected bugs are measured by
 * `npm run test:mutation` (test/sqlite/mutation.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { runConformanceCheck, storeConformanceChecks } from '../src/testing/index.js';
import { describeStoreConformance } from '../src/testing/vitest.js';
import { createSqliteStore, MUTANTS, type Mutant } from './sqlite/store.js';

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

describe('the reference SQLite adapter, tenants', () => {
  const tenancy = storeConformanceChecks.filter((c) => c.name.startsWith('tenants'));

  it('gets the tenancy checks and passes them, but the outbox one (it has no outbox)', async () => {
    expect(tenancy.length).toBe(4);
    const outcomes = new Map<string, unknown>();
    for (const check of tenancy) outcomes.set(check.name, await runConformanceCheck(check, ({ faults }) => createSqliteStore({ faults })));
    for (const [name, outcome] of outcomes) {
      if (name.startsWith('tenants: outbox')) expect(outcome, name).toEqual({ status: 'skipped', reason: 'the store has no outbox (OutboxStore)' });
      else expect(outcome, name).toEqual({ status: 'passed' });
    }
  });

  it("makes a tenant's store once per id over the one database; tenants do not nest; ids compare exactly", async () => {
    const store = createSqliteStore();
    const acme = store.tenant('acme');
    expect(store.tenant('acme')).toBe(acme);
    expect(acme.tenant('globex')).toBe(store.tenant('globex'));
    expect(acme.tenant('acme')).toBe(acme);
    expect(store.tenant('Acme')).not.toBe(acme);
    expect(acme).not.toBe(store);
    // One database handle: closing it through a tenant's store closes it for every tenant.
    acme.close();
    await expect(store.loadUser('u1')).rejects.toThrow(/not open/);
  });

  it('has at least 5 tenancy mutants, each caught by a tenancy check', async () => {
    const mutants = (Object.keys(MUTANTS) as Mutant[]).filter((m) => m.startsWith('tenant-'));
    expect(mutants.length).toBeGreaterThanOrEqual(5);
    for (const mutant of mutants) {
      const failed: string[] = [];
      for (const check of tenancy) {
        const outcome = await runConformanceCheck(check, ({ faults }) => createSqliteStore({ faults, mutant }));
        if (outcome.status === 'failed') failed.push(check.name);
      }
      expect(failed.length, mutant).toBeGreaterThan(0);
    }
  });
});
