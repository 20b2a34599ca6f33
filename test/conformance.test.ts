import { describe, expect, it } from 'vitest';
import { ConflictError } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { runStoreConformance } from '../src/testing/index.js';
import { describeStoreConformance } from '../src/testing/vitest.js';
import type { Store } from '../src/index.js';

describeStoreConformance('memory', () => createMemoryStore());

/**
 * Check-then-act: reads the version, then writes after an await without holding anything, and forces the
 * write through (last writer wins) without keeping idempotency keys unique, as a naive adapter would.
 */
function checkThenActStore(): Store {
  const inner = createMemoryStore();
  return {
    ...inner,
    async commit(c) {
      const current = await inner.loadUser(c.userId);
      if ((current?.version ?? 0) !== c.expectedVersion) throw new ConflictError('stale');
      await new Promise((resolve) => setTimeout(resolve, 1));
      for (;;) {
        const latest = (await inner.loadUser(c.userId))?.version ?? 0;
        try {
          return await inner.commit({ ...c, expectedVersion: latest, idempotency: null });
        } catch (error) {
          if (!(error instanceof ConflictError)) throw error;
        }
      }
    },
  };
}

/** Applies part of a commit before failing on a version conflict: not atomic. */
function tornWriteStore(): Store {
  const inner = createMemoryStore();
  const extraRows = new Map<string, unknown[]>();
  return {
    ...inner,
    async commit(c) {
      const current = await inner.loadUser(c.userId);
      if ((current?.version ?? 0) !== c.expectedVersion) {
        extraRows.set(c.userId, c.ledger);
        throw new ConflictError('stale');
      }
      return inner.commit(c);
    },
    async readLedger(q) {
      const rows = await inner.readLedger(q);
      const torn = (extraRows.get(q.userId) ?? []) as typeof rows;
      return [...rows, ...torn.filter((r) => r.kind === q.kind && r.key === q.key)];
    },
  };
}

describe('the conformance suite rejects broken stores', () => {
  it('rejects a check-then-act store (racing commits, racing creates, idempotency)', async () => {
    const { failed } = await runStoreConformance(checkThenActStore);
    const names = failed.map((f) => f.name);
    expect(names).toContain('racing commits on one version: exactly one wins');
    expect(names).toContain('racing creates of one user: exactly one wins');
    expect(names).toContain('idempotency records are stored, read back and unique');
  });

  it('rejects a store whose failed commits leave rows behind', async () => {
    const { failed } = await runStoreConformance(tornWriteStore);
    expect(failed.map((f) => f.name)).toContain('a stale version fails with a conflict and changes nothing');
  });

  it('accepts the memory store', async () => {
    const report = await runStoreConformance(() => createMemoryStore());
    expect(report.failed).toEqual([]);
    expect(report.passed.length).toBeGreaterThan(0);
    // The memory store calls no fault point (its writes cannot fail half-way): the atomicity checks do not
    // apply, and are reported so, not passed.
    expect(report.skipped.map((s) => s.name)).toEqual(report.skipped.map((s) => s.name).filter((n) => n.startsWith('atomicity (fault injection)')));
    expect(report.skipped.length).toBe(4);
    expect(report.skipped[0]?.reason).toMatch(/calls no fault point/);
  });
});
