/**
 * commitBatch on a PostgreSQL server under concurrency: batches over the same users in opposite orders (the
 * store locks a batch's users in id order first, so they never deadlock), and batches racing to create the
 * same users with the same idempotency keys (each user and key at most once, counters exact).
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { isLaurelErrorCode } from '../src/index.js';
import { createPostgresStore } from '../src/postgres.js';
import { sampleState } from '../src/testing/index.js';
import type { BatchCommitOutcome, Commit, CommitResult } from '../src/store/types.js';
import { PG_URL, uniq } from './servers.js';

const at = '2026-01-05T10:00:00.000Z';

function commitOf(userId: string, expectedVersion: number, tag: string): Commit {
  return {
    userId,
    expectedVersion,
    state: sampleState(userId, expectedVersion + 1),
    ledger: [{ id: `${tag}-${userId}-${expectedVersion}`, userId, kind: 'metric', key: 'lessons', at, delta: 1, total: expectedVersion + 1, data: null }],
    leaderboard: [{ index: 'board', userId, value: expectedVersion + 1, reachedAt: at, date: '2026-01-05', thresholdRank: 5 }],
    counters: expectedVersion === 0 ? { users: 1, n: 1 } : { n: 1 },
    idempotency: { userId, metricKey: 'lessons', key: `k${expectedVersion}`, eventId: `${tag}-${userId}-${expectedVersion}`, at },
  };
}

const applied = (o: BatchCommitOutcome | undefined): o is CommitResult => o !== undefined && !isLaurelErrorCode(o, 'CONFLICT') && !(o instanceof Error);

describe.skipIf(!PG_URL)('commitBatch under concurrency (needs LAUREL_PG_URL)', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 8 });
  afterAll(() => pool.end());

  it('batches over the same users in opposite orders neither deadlock nor apply a version twice', async () => {
    const store = createPostgresStore({ client: pool, schema: uniq('batchlock') });
    await store.migrate();
    const users = Array.from({ length: 20 }, (_, i) => `u${String(i).padStart(2, '0')}`);
    expect((await store.commitBatch?.(users.map((u) => commitOf(u, 0, 'init'))))?.every(applied)).toBe(true);
    for (let round = 1; round <= 10; round++) {
      const started = Date.now();
      const [up, down] = await Promise.all([
        store.commitBatch?.(users.map((u) => commitOf(u, round, `up${round}`))),
        store.commitBatch?.([...users].reverse().map((u) => commitOf(u, round, `down${round}`))),
      ]);
      // A deadlock would cost deadlock_timeout (1 s) and refuse a whole batch as a transaction conflict.
      expect(Date.now() - started).toBeLessThan(1_000);
      for (const o of [...(up ?? []), ...(down ?? [])]) if (!applied(o)) expect(String(o)).toMatch(/Version conflict/);
      // Each user's version was written by exactly one of the two batches.
      const upWins = (up ?? []).map(applied);
      const downWins = [...(down ?? [])].reverse().map(applied);
      expect(upWins.map((w, i) => w !== downWins[i])).toEqual(users.map(() => true));
    }
    expect((await store.loadUsers(users)).map((s) => s?.version)).toEqual(users.map(() => 11));
    expect(await store.getCounters(['users', 'n'])).toEqual({ users: 20, n: 20 * 11 });
    expect((await store.readRange('board', 0, 30)).map((e) => e.value)).toEqual(users.map(() => 11));
  }, 60_000);

  it('batches racing to create the same users with the same keys: each user and key once, counters exact', async () => {
    const store = createPostgresStore({ client: pool, schema: uniq('batchrace') });
    await store.migrate();
    const users = Array.from({ length: 30 }, (_, i) => `c${i}`);
    const shuffled = (seed: number) => [...users].sort((a, b) => ((a.charCodeAt(1) * 31 + seed * 17) % 13) - ((b.charCodeAt(1) * 31 + seed * 17) % 13) || (a < b ? -1 : 1));
    const batches = Array.from({ length: 6 }, (_, b) => shuffled(b).map((u) => commitOf(u, 0, `b${b}`)));
    const outcomes = await Promise.all(batches.map((commits) => store.commitBatch?.(commits) as Promise<BatchCommitOutcome[]>));
    const winners = new Map<string, string[]>();
    for (const [b, out] of outcomes.entries()) {
      for (const [i, o] of out.entries()) {
        const c = batches[b]?.[i] as Commit;
        if (applied(o)) winners.set(c.userId, [...(winners.get(c.userId) ?? []), c.idempotency?.eventId as string]);
        // Refused: a conflict (a lost race, or a deadlock that refused a whole batch), never anything else.
        else expect(isLaurelErrorCode(o, 'CONFLICT'), String(o)).toBe(true);
      }
    }
    for (const [, ids] of winners) expect(ids).toHaveLength(1);
    expect(winners.size).toBeGreaterThan(0);
    const created = users.filter((u) => winners.has(u));
    expect((await store.loadUsers(users)).map((s) => s?.version ?? 0)).toEqual(users.map((u) => (winners.has(u) ? 1 : 0)));
    for (const u of created) expect((await store.getIdempotencyRecord(u, 'lessons', 'k0'))?.eventId).toBe(winners.get(u)?.[0]);
    for (const u of created) expect((await store.readLedger({ userId: u, kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id)).toEqual(winners.get(u));
    expect(await store.getCounters(['users', 'n'])).toEqual({ users: created.length, n: created.length });
    expect(await store.countEntries('board')).toBe(created.length);
  }, 60_000);
});
