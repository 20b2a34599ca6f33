/**
 * Round trips of the PostgreSQL store: every statement a call sends, counted by wrapping the client's `query`
 * (and, in pool mode, the `query` of every connection the store checks out). A recordEvent is one load
 * (state and idempotency record together) and one commit statement; a batch of commits is one statement.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, type LeaderboardWrite } from '../src/index.js';
import { createPostgresStore, type PostgresStore, type Queryable } from '../src/postgres.js';
import { sampleState, sequentialIds } from '../src/testing/index.js';
import type { Commit, CommitResult } from '../src/store/types.js';
import { PG_URL, uniq } from './servers.js';
import { interceptedPool } from './pg-intercept.js';

interface Counter {
  n: number;
  texts: string[];
}

/** Counts what `fn` sends. */
async function count<T>(counter: Counter, fn: () => Promise<T>): Promise<{ result: T; statements: number; texts: string[] }> {
  counter.n = 0;
  counter.texts = [];
  const result = await fn();
  return { result, statements: counter.n, texts: [...counter.texts] };
}

/** A `pg` Pool seen through a wrapper that counts every statement, on the pool and on checked-out connections. */
function countingPool(pool: pg.Pool) {
  const counter: Counter = { n: 0, texts: [] };
  const seen = (text: string) => {
    counter.n++;
    counter.texts.push(text);
  };
  const client = {
    ...interceptedPool(pool, (text, _params, run) => {
      seen(text);
      return run();
    }),
    on: (event: string, listener: (...a: unknown[]) => void) => pool.on(event as 'error', listener),
    query: (text: string, params?: unknown[]) => {
      seen(text);
      return pool.query(text, params);
    },
  };
  return { client, counter };
}

/** A query-only client (single-connection mode) over PGlite that counts every statement. */
function countingLite(db: PGlite) {
  const counter: Counter = { n: 0, texts: [] };
  const client: Queryable = {
    query: (text, params) => {
      counter.n++;
      counter.texts.push(text);
      return db.query(text, params) as never;
    },
  };
  return { client, counter };
}

const at = '2026-01-05T10:00:00.000Z';

/** A commit with everything a commit can hold: ledger rows, counters, an idempotency record and two writes asking for thresholds. */
function richCommit(userId: string, expectedVersion: number, value: number): Commit {
  const writes: LeaderboardWrite[] = [
    { index: 'board|a', userId, value, reachedAt: at, date: '2026-01-05', thresholdRank: 2 },
    { index: 'board|b', userId, value: value * 2, reachedAt: at, date: '2026-01-05', thresholdRank: 50 },
  ];
  return {
    userId,
    expectedVersion,
    state: sampleState(userId, value),
    ledger: [
      { id: `${userId}-m${expectedVersion}`, userId, kind: 'metric', key: 'lessons', at, delta: value, total: value, data: null },
      { id: `${userId}-p${expectedVersion}`, userId, kind: 'points', key: 'xp', at, delta: 10, total: 10, data: { trigger: 't1', type: 'metric' } },
    ],
    leaderboard: writes,
    counters: { users: 1, 'achievement:first': 1 },
    idempotency: { userId, metricKey: 'lessons', key: `key-${userId}-${expectedVersion}`, eventId: `${userId}-m${expectedVersion}`, at },
  };
}

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'three', name: 'Three', trigger: 'metric', metricKey: 'lessons', metricValue: 3 }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'three-lessons', type: 'achievement', achievementKey: 'three', points: 5 }] }],
  leaderboards: [
    { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01', maxParticipants: 3 },
    { key: 'xp', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2020-01-01' },
  ],
});

async function roundTrips(store: PostgresStore, counter: Counter) {
  await store.migrate();
  for (let i = 0; i < 3; i++) await store.commit(richCommit(`seed${i}`, 0, 10 + i));

  // loadForEvents: one statement, whatever it is asked.
  const load = await count(counter, () =>
    store.loadForEvents?.(['seed0', 'nobody', 'seed2'], [
      { userId: 'seed0', metricKey: 'lessons', key: 'key-seed0-0' },
      { userId: 'seed1', metricKey: 'lessons', key: 'missing' },
    ]) as Promise<unknown>,
  );
  expect(load.statements).toBe(1);
  expect(load.result).toMatchObject({ users: [{ version: 1 }, null, { version: 1 }], records: [{ eventId: 'seed0-m0' }, null] });

  // A commit with ledger rows, counters, an idempotency record and two writes with thresholds: one statement.
  const one = await count(counter, () => store.commit(richCommit('seed1', 1, 11.5)));
  expect(one.statements).toBe(1);
  expect(one.result).toEqual({
    version: 2,
    ranks: [
      { index: 'board|a', userId: 'seed1', previousRank: 2, rank: 2, previousValue: 11, value: 11.5, threshold: 11.5 },
      { index: 'board|b', userId: 'seed1', previousRank: 2, rank: 2, previousValue: 22, value: 23, threshold: 0 },
    ],
  });
  expect(await store.getCounters(['users', 'achievement:first'])).toEqual({ users: 4, 'achievement:first': 4 });
  expect(await store.getIdempotencyRecord('seed1', 'lessons', 'key-seed1-1')).not.toBeNull();
  expect(await store.readLedger({ userId: 'seed1', kind: 'points', key: 'xp', order: 'asc' })).toHaveLength(2);

  // 100 commits over 100 users: one statement; the ranks are those of commits one after another.
  const commits = Array.from({ length: 100 }, (_, i) => richCommit(`b${String(i).padStart(3, '0')}`, 0, (i * 37) % 101));
  const batch = await count(counter, () => store.commitBatch?.(commits) as Promise<CommitResult[]>);
  expect(batch.statements).toBe(1);
  expect(batch.result).toHaveLength(100);
  const sorted: { userId: string; value: number }[] = [{ userId: 'seed0', value: 10 }, { userId: 'seed1', value: 11.5 }, { userId: 'seed2', value: 12 }];
  for (const [i, c] of commits.entries()) {
    const w = c.leaderboard[0] as LeaderboardWrite & { value: number };
    sorted.push({ userId: c.userId, value: w.value });
    // Equal values and instants: ties by user id.
    sorted.sort((x, y) => y.value - x.value || (x.userId < y.userId ? -1 : x.userId > y.userId ? 1 : 0));
    const r = batch.result[i] as CommitResult;
    expect(r.version).toBe(1);
    expect(r.ranks[0]?.rank, c.userId).toBe(sorted.findIndex((e) => e.userId === c.userId) + 1);
    expect(r.ranks[0]?.threshold, c.userId).toBe(sorted[1]?.value);
  }
  expect(await store.getCounters(['users'])).toEqual({ users: 104 });

  // The engine: a recordEvent is two round trips (one load, one commit), thresholds included.
  let now = Date.parse('2026-01-06T08:00:00Z');
  const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
  for (let i = 0; i < 4; i++) {
    now += 60_000;
    const call = await count(counter, () => engine.recordEvent('lessons', { user: { id: `e${i % 2}` }, value: 2 }, { idempotencyKey: `k${i}` }));
    expect(call.statements, call.texts.join('\n---\n')).toBe(2);
    expect(call.result.leaderboards.all?.threshold).toBeTypeOf('number');
  }
  const replay = await count(counter, () => engine.recordEvent('lessons', { user: { id: 'e0' }, value: 2 }, { idempotencyKey: 'k0' }));
  expect(replay.result.idempotentReplayed).toBe(true);
  expect(replay.statements).toBe(1);
}

describe('round trips', () => {
  it('single connection over PGlite: loadForEvents 1, commit 1, commitBatch of 100 commits 1, recordEvent 2', async () => {
    const db = new PGlite();
    try {
      const { client, counter } = countingLite(db);
      await roundTrips(createPostgresStore({ client, schema: 'roundtrips', transactions: 'serial' }), counter);
    } finally {
      await db.close();
    }
  }, 60_000);

  describe.skipIf(!PG_URL)('on a server', () => {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
    afterAll(() => pool.end());

    it('pg Pool (pool mode, no BEGIN/COMMIT): loadForEvents 1, commit 1, commitBatch of 100 commits over 100 users 1, recordEvent 2', async () => {
      const { client, counter } = countingPool(pool);
      await roundTrips(createPostgresStore({ client: client as never, schema: uniq('rt') }), counter);
    }, 60_000);

    it('one pg.Client (serial mode): the same', async () => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try {
        const counter: Counter = { n: 0, texts: [] };
        const client: Queryable = {
          query: (text, params) => {
            counter.n++;
            counter.texts.push(text);
            return c.query(text, params) as never;
          },
        };
        await roundTrips(createPostgresStore({ client, schema: uniq('rt'), transactions: 'serial' }), counter);
      } finally {
        await c.end();
      }
    }, 60_000);
  });
});
