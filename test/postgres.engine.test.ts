import { PGlite } from '@electric-sql/pglite';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, StorageUnavailableError, type Store } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { createPostgresStore, type Queryable } from '../src/postgres.js';
import { arbEventSequence, sequentialIds } from '../src/testing/index.js';

const db = new PGlite();
afterAll(() => db.close());
let n = 0;

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'three', name: 'Three', trigger: 'metric', metricKey: 'lessons', metricValue: 3 }],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 1 } },
  pointsSystems: [
    { key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'three-lessons', type: 'achievement', achievementKey: 'three', points: 5 }] },
    { key: 'energy', name: 'Energy', maxPoints: 3, triggers: [{ key: 'signup', type: 'user_creation', points: 3 }, { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 2, points: 1 }] },
  ],
  leaderboards: [
    { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01', maxParticipants: 3 },
    { key: 'weekly', name: 'Weekly', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-05', runUnit: 'day', runInterval: 7 },
  ],
});

async function pgStore(client: Queryable & Record<string, unknown> = db as never, transactions?: 'serial') {
  const store = createPostgresStore({ client, schema: `engine_${++n}`, ...(transactions ? { transactions } : {}) });
  await store.migrate();
  return store;
}

type Ev = { metricKey: string; user: { id: string }; value: number; gapMs: number; idempotencyKey?: string };

async function replay(store: Store, events: Ev[]) {
  let now = Date.parse('2026-01-05T08:00:00Z');
  const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
  const responses = [];
  for (const e of events) {
    now += e.gapMs;
    responses.push(await engine.recordEvent('lessons', { user: e.user, value: e.value }, e.idempotencyKey ? { idempotencyKey: e.idempotencyKey } : {}));
  }
  return { engine, responses };
}

describe('the engine on PostgreSQL (PGlite)', () => {
  it('gives the same responses and state as on the memory store, for any event sequence', async () => {
    await fc.assert(
      fc.asyncProperty(arbEventSequence(config, { maxLength: 12, idempotency: true, maxGapMs: 30 * 3_600_000, allowNegative: true, size: 'small' }), async (events) => {
        const mem = createMemoryStore();
        const pg = await pgStore();
        const a = await replay(mem, events as Ev[]);
        const b = await replay(pg, events as Ev[]);
        expect(b.responses).toEqual(a.responses);
        for (const id of ['u1', 'u2', 'u3']) {
          expect(await pg.loadUser(id)).toEqual(await mem.loadUser(id));
          expect(await pg.readLedger({ userId: id, kind: 'points', key: 'xp', order: 'asc' })).toEqual(await mem.readLedger({ userId: id, kind: 'points', key: 'xp', order: 'asc' }));
        }
        expect(await b.engine.getLeaderboard('all')).toEqual(await a.engine.getLeaderboard('all'));
        expect(await b.engine.getStreak('u1').catch(() => null)).toEqual(await a.engine.getStreak('u1').catch(() => null));
      }),
      { numRuns: 25 },
    );
  }, 120_000);

  it('200 concurrent recordEvent calls for one user: exact total, each key once', async () => {
    const store = await pgStore();
    const engine = createEngine({ config, store });
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => engine.recordEvent('lessons', { user: { id: 'hot' }, value: 0.5 }, { idempotencyKey: `k${i % 120}` })));
    expect(results.filter((r) => !r.idempotentReplayed)).toHaveLength(120);
    expect(Number((await store.loadUser('hot'))?.state.metrics.lessons)).toBe(60);
    expect(await store.readLedger({ userId: 'hot', kind: 'metric', key: 'lessons', order: 'asc' })).toHaveLength(120);
  }, 60_000);
});

/**
 * A single-connection client over PGlite whose connection can be made to drop at its Nth statement: before
 * sending it (`before`), or once it ran, its answer lost (`after`).
 */
function flakyClient() {
  let count = 0;
  let failAt = Number.POSITIVE_INFINITY;
  let when: 'before' | 'after' = 'before';
  return {
    failAt(n: number, at: 'before' | 'after' = 'before') {
      count = 0;
      failAt = n;
      when = at;
    },
    heal() {
      failAt = Number.POSITIVE_INFINITY;
    },
    get count() {
      return count;
    },
    async query(text: string, params?: unknown[]) {
      if (++count === failAt) {
        if (when === 'after') await db.query(text, params);
        throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      }
      return db.query(text, params);
    },
  };
}

// Ids are opaque and a failed attempt draws some, so snapshots compare everything but ids.
const withoutIds = (value: unknown): unknown =>
  JSON.parse(JSON.stringify(value), (k, v) => (k === 'id' || k === 'completionId' || k === 'eventId' ? undefined : v));

describe('faults', () => {
  it('a connection dropped at any statement of a call leaves no partial state, and a retry gives the uninterrupted result', async () => {
    const events: Ev[] = [
      { metricKey: 'lessons', user: { id: 'f' }, value: 2, gapMs: 0, idempotencyKey: 'a' },
      { metricKey: 'lessons', user: { id: 'g' }, value: 1, gapMs: 3_600_000, idempotencyKey: 'b' },
      { metricKey: 'lessons', user: { id: 'f' }, value: 1, gapMs: 86_400_000, idempotencyKey: 'c' },
    ];
    const snapshot = async (store: Store) =>
      withoutIds({
        f: await store.loadUser('f'),
        g: await store.loadUser('g'),
        ledger: await store.readLedger({ userId: 'f', kind: 'points', key: 'xp', order: 'asc' }),
        metric: await store.readLedger({ userId: 'f', kind: 'metric', key: 'lessons', order: 'asc' }),
        streak: await store.readLedger({ userId: 'f', kind: 'streak', key: 'streak', order: 'asc' }),
        board: await store.readRange('lb|all|2020-01-01|', 0, 10),
        history: await store.readRankHistory('lb|all|2020-01-01|', 'f', 10),
        idempotency: await store.getIdempotencyRecord('f', 'lessons', 'c'),
        counters: await store.getCounters(['users', 'achievement:three']),
      });
    const reference = await pgStore();
    await replay(reference, events);
    const expected = await snapshot(reference);
    const last = events[2] as Ev;
    const setup = async () => {
      const client = flakyClient();
      const store = await pgStore(client as never, 'serial');
      let now = Date.parse('2026-01-05T08:00:00Z');
      const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
      for (const e of events.slice(0, 2)) {
        now += e.gapMs;
        await engine.recordEvent('lessons', { user: e.user, value: e.value }, { idempotencyKey: e.idempotencyKey as string });
      }
      now += last.gapMs;
      const call = () => engine.recordEvent('lessons', { user: last.user, value: last.value }, { idempotencyKey: last.idempotencyKey as string });
      return { client, store, call };
    };
    // The statements the last call runs on a healthy connection: one load (state and idempotency record
    // together) and one commit statement; every one of them is a place to drop the connection.
    const healthy = await setup();
    healthy.client.failAt(Number.POSITIVE_INFINITY);
    const response = await healthy.call();
    const statements = healthy.client.count;
    expect(statements).toBe(2);
    let failures = 0;
    for (const at of ['before', 'after'] as const) {
      for (let failAt = 1; failAt <= statements + 1; failAt++) {
        const { client, store, call } = await setup();
        const before = await snapshot(store);
        client.failAt(failAt, at);
        const outcome = await call().then(
          (r) => r,
          (e: unknown) => e,
        );
        client.heal();
        if (outcome instanceof Error) {
          failures++;
          // The store's own typed error, the driver's kept as its cause. A drop of a read, or of the commit
          // before it was sent (the live connection then answers, so the outcome is read back at once),
          // committed nothing.
          expect(outcome).toBeInstanceOf(StorageUnavailableError);
          expect((outcome as StorageUnavailableError).committed).toBe(false);
          expect(((outcome as StorageUnavailableError).cause as Error).message).toBe('Connection terminated unexpectedly');
          expect(await snapshot(store)).toEqual(before);
          await call();
        } else if (at === 'after' && failAt === statements) {
          // The commit ran and its answer was lost: read back as committed, the call succeeds; its ranks, lost
          // with the answer, read null.
          expect(withoutIds(outcome)).toEqual(withoutIds({ ...response, leaderboards: Object.fromEntries(Object.entries(response.leaderboards).map(([k, b]) => [k, { ...b, rank: null, previousRank: null }])) }));
        } else {
          expect(failAt).toBe(statements + 1);
          expect(outcome).toEqual(response);
        }
        expect(await snapshot(store)).toEqual(expected);
      }
    }
    // Every statement of the call, dropped before it was sent, and the load, dropped after it ran, fail the call.
    expect(failures).toBe(statements + 1);
  }, 120_000);
});
