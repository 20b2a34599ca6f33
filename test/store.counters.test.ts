/**
 * Counter increments a store could not keep are refused alike by every store, before anything changes: the
 * memory store used to add a fraction, NaN or a string to its counter (which then read NaN, or "NaN2"), while
 * PostgreSQL's bigint column failed the whole statement with a StorageUnavailableError, a server fault. The
 * engine only ever sends whole increments; this guards direct callers of a store.
 */
import { expect, it } from 'vitest';
import { isLaurelErrorCode, type Commit, type Store } from '../src/index.js';
import { sampleState } from '../src/testing/index.js';
import { freshStore, onEachStore } from './stores.js';

const commitOf = (userId: string, expectedVersion: number, counters: Record<string, unknown>): Commit =>
  ({
    userId,
    expectedVersion,
    state: sampleState(userId, 1),
    ledger: [{ id: `${userId}-e${expectedVersion}`, userId, kind: 'metric', key: 'lessons', at: '2026-01-01T00:00:00.000Z', delta: 1, total: 1, data: null }],
    leaderboard: [{ index: 'lb|c', userId, value: 1, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01' }],
    // Bad on purpose: what a direct caller might hand a store.
    counters: counters as Record<string, number>,
    idempotency: { userId, metricKey: 'lessons', key: `k-${userId}-${expectedVersion}`, eventId: `${userId}-e${expectedVersion}`, at: '2026-01-01T00:00:00.000Z' },
  });

const refused = async (p: Promise<unknown>, what: string) => {
  const error = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(isLaurelErrorCode(error, 'VALIDATION'), `${what}: ${String(error)}`).toBe(true);
};

/** Nothing of user `id` was stored: no state, ledger row, entry or idempotency record. */
async function nothingOf(store: Store, id: string) {
  expect(await store.loadUser(id)).toBeNull();
  expect(await store.readLedger({ userId: id, kind: 'metric', key: 'lessons', order: 'asc' })).toEqual([]);
  expect(await store.getEntry('lb|c', id)).toBeNull();
  expect(await store.getIdempotencyRecord(id, 'lessons', `k-${id}-0`)).toBeNull();
}

const BAD: [string, Record<string, unknown>][] = [
  ['a fraction', { x: 0.5 }],
  ['a negative fraction', { users: 1, x: -2.25 }],
  ['NaN', { x: Number.NaN }],
  ['Infinity', { x: Number.POSITIVE_INFINITY }],
  ['beyond 2^53', { x: 2 ** 60 }],
  ['a numeric string', { x: '2' }],
  ['null', { x: null }],
  ['a name with NUL', { 'a\u0000b': 1 }],
  ['a name with a lone surrogate', { ['a\ud800']: 1 }],
  ['a name of 1,001 characters', { ['n'.repeat(1001)]: 1 }],
];

onEachStore('counter increments a store cannot keep', (kind) => {
  it('commit refuses them with a ValidationError and changes nothing', async () => {
    const store = await freshStore(kind);
    for (const [what, counters] of BAD) {
      const id = `u-${BAD.findIndex(([w]) => w === what)}`;
      await refused(store.commit(commitOf(id, 0, counters)), what);
      await nothingOf(store, id);
    }
    expect(await store.getCounters(['x', 'users'])).toEqual({ x: 0, users: 0 });
    // Counters that are not an object at all.
    await refused(store.commit({ ...commitOf('v', 0, {}), counters: null as never }), 'null counters');
    await nothingOf(store, 'v');
  });

  it('whole increments still add up, negative and zero ones too', async () => {
    const store = await freshStore(kind);
    await store.commit(commitOf('a', 0, { users: 1, x: -3, y: 0 }));
    await store.commit(commitOf('a', 1, { x: 2 ** 53 - 1 - 10 }));
    expect(await store.getCounters(['users', 'x', 'y'])).toEqual({ users: 1, x: 2 ** 53 - 1 - 13, y: 0 });
  });

  it('commitBatch refuses the whole batch when one commit holds one: nothing of the others is applied', async () => {
    const store = await freshStore(kind);
    const batch = store.commitBatch?.bind(store);
    if (!batch) throw new Error('the built-in stores have commitBatch');
    await refused(batch([commitOf('b1', 0, { users: 1 }), commitOf('b2', 0, { users: 0.5 })]), 'the batch');
    await nothingOf(store, 'b1');
    await nothingOf(store, 'b2');
    // A batch of one names the commit by its place, as a longer batch does, on every store.
    const error = await batch([commitOf('b3', 0, { users: 0.5 })]).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toContain('commits.0.counters.users');
    expect(await store.getCounters(['users'])).toEqual({ users: 0 });
  });

  it('eraseUser refuses them and keeps the user', async () => {
    const store = await freshStore(kind);
    await store.commit(commitOf('e', 0, { users: 1 }));
    await refused(store.eraseUser({ userId: 'e', expectedVersion: 1, counters: { users: -0.5 } }), 'the erasure');
    expect((await store.loadUser('e'))?.version).toBe(1);
    expect(await store.getCounters(['users'])).toEqual({ users: 1 });
    expect((await store.eraseUser({ userId: 'e', expectedVersion: 1, counters: { users: -1 } })).erased).toBe(true);
    expect(await store.getCounters(['users'])).toEqual({ users: 0 });
  });
});
