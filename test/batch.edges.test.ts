/**
 * recordEvents edge cases found by a fault fuzz: a batch refused whole (PostgreSQL's serialization failure or
 * deadlock) is redone in input order, as one by one; holes in a sparse input array get a result like any
 * other entry that is not an event; a failed load gives each event its result.
 */
import { expect, it } from 'vitest';
import { boardIndex, ConflictError, createEngine, defineConfig, type BatchEvent, type Store } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const config = defineConfig({
  timeZone: 'UTC',
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  leaderboards: [{ key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' }],
});

it('a batch refused whole is redone in input order, with the ranks one by one gives', async () => {
  const events: BatchEvent<'lessons'>[] = [
    { metricKey: 'lessons', user: { id: 'a' }, value: 1 },
    { metricKey: 'lessons', user: { id: 'b' }, value: 2 },
    { metricKey: 'lessons', user: { id: 'a' }, value: 5 },
    { metricKey: 'lessons', user: { id: 'c' }, value: 3 },
  ];
  const run = async (refuseFirst: boolean) => {
    const inner = createMemoryStore() as ReturnType<typeof createMemoryStore> & Required<Pick<Store, 'loadForEvents' | 'commitBatch'>>;
    let refuse = refuseFirst;
    // As the PostgreSQL store answers a serialization failure or deadlock: every commit of the batch refused.
    const store: Store = {
      ...inner,
      loadForEvents: (users, lookups) => inner.loadForEvents(users, lookups),
      commitBatch: async (cs) => {
        if (refuse) {
          refuse = false;
          return cs.map(() => new ConflictError('Transaction conflict (40001)'));
        }
        return inner.commitBatch(cs);
      },
    };
    const engine = createEngine({ config, store, clock: () => new Date('2026-01-05T10:00:00Z'), newId: sequentialIds() });
    const out = await engine.recordEvents(events);
    const ranks = out.map((r) => (r.ok ? [r.response.leaderboards.all?.previousRank ?? null, r.response.leaderboards.all?.rank ?? null] : r.error.code));
    const history = await Promise.all(['a', 'b', 'c'].map((id) => store.readRankHistory(boardIndex('all', '2020-01-01', ''), id, 10).catch(() => null)));
    return { ranks, board: (await engine.getLeaderboard('all')).rankings.map((r) => [r.userId, r.rank]), history };
  };
  const once = await run(false);
  expect(once.ranks).toEqual([
    [null, 1],
    [null, 1],
    [2, 1],
    [null, 2],
  ]);
  // Redone user by user (a, a, b, c) it read [null,1], [null,2], [1,1], [null,2]: b's first rank came after a's second event.
  expect(await run(true)).toEqual(once);
});

it('holes in a sparse input array are refused like any entry that is not an event', async () => {
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date('2026-01-05T10:00:00Z') });
  const events = new Array<BatchEvent<'lessons'>>(3);
  events[1] = { metricKey: 'lessons', user: { id: 'u' }, value: 1 };
  const out = await engine.recordEvents(events);
  expect(out).toHaveLength(3);
  const holes = [out[0], out[2]];
  const refusedLikeUndefined = (await engine.recordEvents([undefined as unknown as BatchEvent<'lessons'>]))[0];
  for (const r of holes) {
    expect(r?.ok).toBe(false);
    expect(r).toEqual(refusedLikeUndefined);
  }
  expect(out[1]?.ok).toBe(true);
});

it('a batch whose load fails: one result per event, each with the storage error (a bad event keeps its own), nothing written', async () => {
  // Found by a fault fuzz of batches: the failed load rejected the whole call, so no event had its result.
  const inner = createMemoryStore() as ReturnType<typeof createMemoryStore> & Required<Pick<Store, 'loadForEvents'>>;
  let fail = true;
  const store: Store = {
    ...inner,
    loadForEvents: async (users, lookups) => {
      if (fail) throw new Error('connection reset');
      return inner.loadForEvents(users, lookups);
    },
  };
  const engine = createEngine({ config, store, clock: () => new Date('2026-01-05T10:00:00Z'), newId: sequentialIds() });
  const events: BatchEvent<'lessons'>[] = [
    { metricKey: 'lessons', user: { id: 'u1' }, value: 1 },
    { metricKey: 'nope' as 'lessons', user: { id: 'u2' }, value: 1 },
    { metricKey: 'lessons', user: { id: 'u3' }, value: 2 },
  ];
  const results = await engine.recordEvents(events);
  expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['STORAGE_UNAVAILABLE', 'NOT_FOUND', 'STORAGE_UNAVAILABLE']);
  expect(inner.userCount).toBe(0);
  // Once the store answers again, the same batch goes through.
  fail = false;
  expect((await engine.recordEvents(events)).map((r) => (r.ok ? r.response.total : r.error.code))).toEqual([1, 'NOT_FOUND', 2]);
});
