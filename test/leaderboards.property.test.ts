import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import Redis from 'ioredis';
import { afterAll } from 'vitest';
import { compareEntries, createEngine, defineConfig, withRankIndex, type IndexEntry, type Store } from '../src/index.js';
import { createRedisRankIndex } from '../src/redis.js';
import { REDIS_URL, uniq } from './servers.js';
import { createMemoryStore } from '../src/memory.js';
import { OrderedIndex } from '../src/store/ordered-index.js';
import { sequentialIds } from '../src/testing/index.js';

describe('leaderboard index (sorted blocks + Fenwick tree) vs a sorted array', () => {
  it('insert, remove, rank, at, range and countAtLeast agree with sorting everything', () => {
    const op = fc.record({ user: fc.integer({ min: 0, max: 60 }), value: fc.integer({ min: -3, max: 20 }), at: fc.integer({ min: 0, max: 5 }) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), fc.integer({ min: 0, max: 70 }), fc.integer({ min: 1, max: 15 }), (ops, offset, limit) => {
        const tree = new OrderedIndex();
        const current = new Map<string, IndexEntry>();
        for (const o of ops) {
          const userId = `u${o.user}`;
          const old = current.get(userId);
          if (old) expect(tree.remove(old)).toBeGreaterThan(0);
          current.delete(userId);
          if (o.value > 0) {
            const e = { userId, value: o.value, reachedAt: `2026-01-01T00:00:0${o.at}.000Z` };
            tree.insert(e);
            current.set(userId, e);
          }
        }
        const sorted = [...current.values()].sort(compareEntries);
        expect(tree.size).toBe(sorted.length);
        sorted.forEach((e, i) => {
          expect(tree.rank(e)).toBe(i + 1);
          expect(tree.at(i)).toBe(e);
        });
        expect(tree.range(offset, limit)).toEqual(sorted.slice(offset, offset + limit));
        for (const v of [0, 1, 5, 10, 21]) expect(tree.countAtLeast(v)).toBe(sorted.filter((e) => e.value >= v).length);
      }),
      { numRuns: 300 },
    );
  });
});

const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
afterAll(async () => {
  await redis?.quit();
});
const stores: [string, () => Store][] = [['memory store', () => createMemoryStore()]];
if (redis) stores.push(['memory store + Redis ranks', () => withRankIndex(createMemoryStore(), createRedisRankIndex({ redis, prefix: `${uniq('lbprop')}:` }))]);

describe.each(stores)('leaderboards through the engine vs a naive model (%s)', (_name, makeStore) => {
  it('for any sequence of value updates over up to 2 000 users: ranks, thresholds and offset pages are identical', async () => {
    const arb = fc.record({
      max: fc.integer({ min: 1, max: 50 }),
      users: fc.integer({ min: 1, max: 2000 }),
      updates: fc.array(fc.record({ user: fc.nat(), delta: fc.integer({ min: -5, max: 10 }), gap: fc.constantFrom(0, 0, 1000) }), { minLength: 1, maxLength: 400 }),
      pages: fc.array(fc.record({ offset: fc.integer({ min: 0, max: 60 }), limit: fc.integer({ min: 1, max: 20 }) }), { maxLength: 4 }),
    });
    await fc.assert(
      fc.asyncProperty(arb, async ({ max, users, updates, pages }) => {
        const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], leaderboards: [{ key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', maxParticipants: max }] });
        let now = Date.parse('2026-01-05T00:00:00Z');
        const engine = createEngine({ config, store: makeStore(), clock: () => new Date(now), newId: sequentialIds() });
        const model = new Map<string, { value: number; reachedAt: string }>();
        for (const u of updates) {
          now += u.gap;
          const userId = `user-${u.user % users}`;
          const r = await engine.recordEvent('m', { user: { id: userId }, value: u.delta });
          const before = model.get(userId) ?? { value: 0, reachedAt: '' };
          if (u.delta !== 0) model.set(userId, { value: before.value + u.delta, reachedAt: new Date(now).toISOString() });
          const ranked = [...model.entries()]
            .filter(([, e]) => e.value > 0)
            .map(([userId, e]) => ({ userId, ...e }))
            .sort(compareEntries);
          const rankOf = (id: string) => {
            const i = ranked.findIndex((e) => e.userId === id);
            return i >= 0 && i < max ? i + 1 : null;
          };
          if (u.delta !== 0) {
            expect(r.leaderboards.b?.rank ?? null).toBe(rankOf(userId));
            expect(r.leaderboards.b?.threshold).toBe(ranked.length >= max ? (ranked[max - 1] as { value: number }).value : 0);
          } else {
            expect(r.leaderboards.b).toBeUndefined();
          }
        }
        const ranked = [...model.entries()].filter(([, e]) => e.value > 0).map(([userId, e]) => ({ userId, ...e })).sort(compareEntries).slice(0, max);
        for (const p of pages) {
          const page = await engine.getLeaderboard('b', p);
          expect(page.rankings.map((x) => [x.userId, x.rank, x.value])).toEqual(ranked.slice(p.offset, p.offset + p.limit).map((e, i) => [e.userId, p.offset + i + 1, e.value]));
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
