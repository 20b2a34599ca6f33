/**
 * The Redis rank index answers one `apply` (every write of a commit, or of a whole batch of commits) with one
 * script in one round trip, with the same results as applying the writes one at a time; thresholds come in
 * the same reply. `withRankIndex.commitBatch` on Redis gives the rank changes of sequential commits.
 */
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { LeaderboardWrite } from '../src/core/types.js';
import { ConflictError, isLaurelErrorCode } from '../src/errors.js';
import { createMemoryStore } from '../src/memory.js';
import { createRedisRankIndex, withRankIndex, type RankIndex, type RedisLike, type VersionedWrite } from '../src/redis.js';
import { sampleState } from '../src/testing/index.js';
import type { BatchCommitOutcome, Commit, RankHistoryRow, Store } from '../src/store/types.js';
import { REDIS_URL, uniq } from './servers.js';

/** A small seeded generator (mulberry32), so a failure can be replayed. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)] as T };
}

const VALUES = [0, 1, 1, 2, 2.5, 0.30000000000000004, -3, 10, 1e6, 7] as const;
const INSTANTS = ['1969-12-31T23:59:59.999Z', '1900-01-02T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.001Z', '2026-01-02T10:00:00.000Z'] as const;
const INDEXES = ['lb|a|2026-01-01|', 'lb|b|2026-01-01|g', 'pt|xp'] as const;
const USERS = ['u0', 'u1', 'u2', 'u3', 'é', '🙂', 'u|1|0', '|'] as const;

/** Random writes: removes, ties, stale and repeated versions, unranked writes, same-day and next-day history, thresholds. */
function randomWrites(seed: number, n: number): VersionedWrite[] {
  const r = rng(seed);
  const versions = new Map<string, number>();
  const days = new Map<string, number>();
  const out: VersionedWrite[] = [];
  for (let i = 0; i < n; i++) {
    const index = r.pick(INDEXES);
    const userId = r.pick(USERS);
    const key = `${index} ${userId}`;
    const roll = r.next();
    const current = versions.get(key) ?? 0;
    // mostly newer versions; sometimes the same one again (a retry) or an older one (a late write)
    const version = roll < 0.7 ? current + 1 + r.int(2) : roll < 0.85 ? Math.max(1, current) : Math.max(1, current - 1 - r.int(2));
    versions.set(key, Math.max(current, version));
    const day = (days.get(key) ?? 1) + (r.next() < 0.3 ? 1 : 0);
    days.set(key, day);
    const date = `2026-02-${String(day).padStart(2, '0')}`;
    const extra = { ...(index === 'pt|xp' ? { unranked: true } : {}), ...(r.next() < 0.4 ? { thresholdRank: 1 + r.int(7) } : {}) };
    out.push(
      r.next() < 0.15
        ? { index, userId, remove: true, date, version, ...extra }
        : { index, userId, value: r.pick(VALUES), reachedAt: r.pick(INSTANTS), date, version, ...extra },
    );
  }
  return out;
}

/** Everything an index can be read back as: pages, counts and every user's rank history and version. */
async function snapshot(index: RankIndex) {
  const out: Record<string, unknown> = {};
  for (const name of INDEXES) {
    const users = [];
    let cursor = '0';
    do {
      const page = await index.scanUsers(name, cursor, 100);
      cursor = page.cursor;
      users.push(...page.users);
    } while (cursor !== '0');
    out[name] = {
      range: await index.readRange(name, 0, 100),
      count: await index.countEntries(name),
      counted: await index.countEntries(name, { min: 1, max: 100 }),
      users: users.sort((a, b) => (a.userId < b.userId ? -1 : 1)),
      history: await Promise.all(USERS.map((u) => index.readRankHistory(name, u, 100))),
    };
  }
  return out;
}

/** A RedisLike that records the commands it sends. */
function counting(redis: Redis): RedisLike & { sent: string[] } {
  const sent: string[] = [];
  return {
    sent,
    get status() {
      return redis.status;
    },
    call: (command, ...args) => {
      sent.push(command);
      return redis.call(command, ...args);
    },
  };
}

describe.skipIf(!REDIS_URL)('Redis rank index: one round trip per apply (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await redis?.quit();
  });

  it('sends one command for an apply of many writes to several indexes, and Redis receives exactly that one', async () => {
    const prefix = `${uniq('one-rt')}:`;
    const index = createRedisRankIndex({ redis: redis as Redis, prefix });
    // Loads the script (a server that never ran it answers the first EVALSHA with NOSCRIPT, then gets EVAL).
    await index.apply([{ index: 'warm', userId: 'u', value: 1, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 }]);
    const monitor = await (redis as Redis).monitor();
    const seen: { command: string; source: string }[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (args.some((a) => String(a).includes(prefix))) seen.push({ command: String(args[0]).toLowerCase(), source });
    });
    try {
      const writes = randomWrites(7, 40);
      const changes = await index.apply(writes);
      expect(changes).toHaveLength(40);
      await new Promise((r) => setTimeout(r, 200));
      const fromClient = seen.filter((s) => s.source !== 'lua');
      expect(fromClient.map((s) => s.command)).toEqual(['evalsha']);
      // ...and the script did the work inside Redis.
      expect(seen.filter((s) => s.source === 'lua').length).toBeGreaterThan(40 * 3);
    } finally {
      monitor.disconnect();
    }
  });

  for (const [seed, n] of [[1, 120], [2, 120], [3, 120], [4, 120], [5, 120], [6, 120], [7, 2300]] as const) {
    it(`applying ${n} writes all at once equals applying them one at a time: rank changes, thresholds, pages, history (seed ${seed})`, async () => {
      const writes = randomWrites(seed, n);
      const all = counting(redis as Redis);
      const together = createRedisRankIndex({ redis: all, prefix: `${uniq(`together${seed}`)}:` });
      const apart = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq(`apart${seed}`)}:` });
      const batch = await together.apply(writes);
      // One script per 1000 writes (run one after another).
      expect(all.sent.filter((c) => c !== 'EVAL')).toEqual(Array.from({ length: Math.ceil(n / 1000) }, () => 'EVALSHA'));
      const one = [];
      for (const w of writes) {
        const [change] = await apart.apply([w]);
        one.push(change);
        if (w.thresholdRank !== undefined) {
          // The threshold is what a read at that rank right after the write gives.
          const [at] = await apart.readRange(w.index, w.thresholdRank - 1, 1);
          expect(change?.threshold).toBe(at?.value ?? 0);
        } else {
          expect(change).not.toHaveProperty('threshold');
        }
      }
      expect(batch).toEqual(one);
      expect(await snapshot(together)).toEqual(await snapshot(apart));
    });
  }

  it('reports the value at the threshold rank after each write, 0 when the index holds fewer', async () => {
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('threshold')}:` });
    const at = '2026-01-01T00:00:00.000Z';
    const set = (userId: string, value: number, version: number, thresholdRank?: number): VersionedWrite => ({
      index: 'lb|t',
      userId,
      value,
      reachedAt: at,
      date: '2026-01-01',
      version,
      ...(thresholdRank === undefined ? {} : { thresholdRank }),
    });
    const first = await index.apply([set('a', 50, 1), set('b', 40, 1), set('c', 30, 1), set('d', 20, 1, 4), set('x', 0.30000000000000004, 1, 6)]);
    expect(first.map((c) => c.threshold)).toEqual([undefined, undefined, undefined, 20, 0]);
    expect(await index.apply([set('e', 35, 1, 3)])).toMatchObject([{ rank: 3, threshold: 35 }]);
    expect(await index.apply([set('e', 35, 2, 6)])).toMatchObject([{ rank: 3, threshold: 0.30000000000000004 }]);
    expect(await index.apply([set('e', -2.5, 3, 6)])).toMatchObject([{ rank: 6, threshold: -2.5 }]);
    expect(await index.apply([{ index: 'lb|t', userId: 'b', remove: true, date: '2026-01-01', version: 2, thresholdRank: 2 }])).toMatchObject([{ rank: null, threshold: 30 }]);
    // A stale write changes nothing and reports the threshold as it stands.
    expect(await index.apply([set('a', 1, 0, 1)])).toMatchObject([{ rank: 1, value: 50, threshold: 50 }]);
    // Several writes in one call: each sees the writes before it.
    expect((await index.apply([set('y', 100, 1, 1), set('z', 200, 1, 1), { index: 'lb|t', userId: 'z', remove: true, date: '2026-01-01', version: 2, thresholdRank: 1 }, set('w', 1, 1, 99)])).map((c) => c.threshold)).toEqual([100, 200, 100, 0]);
    // Unranked writes get it too; an empty index reads 0.
    expect(await index.apply([{ index: 'pt|t', userId: 'a', value: 5, reachedAt: at, date: '2026-01-01', version: 1, unranked: true, thresholdRank: 1 }])).toMatchObject([{ threshold: 5 }]);
    expect(await index.apply([{ index: 'lb|empty', userId: 'a', remove: true, date: '2026-01-01', version: 1, thresholdRank: 1 }])).toEqual([
      { index: 'lb|empty', userId: 'a', previousRank: null, rank: null, previousValue: null, value: null, threshold: 0 },
    ]);
  });

  it('an unranked write costs no rank lookup: null ranks, values kept, no history row', async () => {
    const prefix = `${uniq('unranked')}:`;
    const index = createRedisRankIndex({ redis: redis as Redis, prefix });
    const put = (userId: string, value: number, version: number): VersionedWrite => ({ index: 'pt|u', userId, value, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version, unranked: true });
    expect(await index.apply([put('a', 5, 1)])).toEqual([{ index: 'pt|u', userId: 'a', previousRank: null, rank: null, previousValue: null, value: 5 }]);
    const monitor = await (redis as Redis).monitor();
    const lua: string[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === 'lua' && args.some((a) => String(a).includes(prefix))) lua.push(String(args[0]).toLowerCase());
    });
    try {
      expect(await index.apply([put('b', 9, 1), put('a', 7, 2), put('a', 1, 1)])).toEqual([
        { index: 'pt|u', userId: 'b', previousRank: null, rank: null, previousValue: null, value: 9 },
        { index: 'pt|u', userId: 'a', previousRank: null, rank: null, previousValue: 5, value: 7 },
        { index: 'pt|u', userId: 'a', previousRank: null, rank: null, previousValue: 7, value: 7 },
      ]);
      await new Promise((r) => setTimeout(r, 200));
      expect(lua.length).toBeGreaterThan(0);
      expect(lua.filter((c) => c === 'zrank' || c.startsWith('l'))).toEqual([]);
    } finally {
      monitor.disconnect();
    }
    expect(await index.readRankHistory('pt|u', 'a', 10)).toEqual([]);
    expect(await index.readRange('pt|u', 0, 10)).toMatchObject([
      { userId: 'b', value: 9, rank: 1 },
      { userId: 'a', value: 7, rank: 2 },
    ]);
    expect(await index.countEntries('pt|u', { min: 6 })).toBe(2);
  });

  it('keeps every history row of a user in an index, as the other stores do (getWrapped reads a year of them)', async () => {
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('hist')}:` });
    const day = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 86_400_000).toISOString().slice(0, 10);
    const writes = Array.from({ length: 130 }, (_, i) => ({ index: 'lb|h', userId: 'u', value: i, reachedAt: `${day(i)}T00:00:00.000Z`, date: day(i), version: i + 1 }));
    await index.apply(writes.slice(0, 60));
    await index.apply(writes.slice(60));
    const rows = await index.readRankHistory('lb|h', 'u', 1000);
    expect(rows).toHaveLength(130);
    expect(rows[0]).toEqual({ date: day(129), previousRank: 1, rank: 1, previousValue: 128, value: 129 });
    expect(rows[129]).toEqual({ date: day(0), previousRank: null, rank: 1, previousValue: null, value: 0 });
    // A write dated before the newest row (a clock that went back) still slots in at its date.
    await index.apply([{ index: 'lb|h', userId: 'u', value: 200, reachedAt: `${day(10)}T12:00:00.000Z`, date: day(10), version: 131 }]);
    const again = await index.readRankHistory('lb|h', 'u', 1000);
    expect(again).toHaveLength(130);
    expect(again[119]).toMatchObject({ date: day(10), rank: 1, value: 200 });
    expect(await index.readRankHistory('lb|h', 'u', 5)).toEqual(again.slice(0, 5));
  });

  it('slots a back-dated write in at its date at any depth of a long history: updating a date, between dates, before the oldest', async () => {
    // The script looks for the write's date from the newest row down, reading the list in growing pieces:
    // depths at the edges of those pieces, and past the end, must all land where a whole read would.
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('deep')}:` });
    const day = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 86_400_000).toISOString().slice(0, 10);
    // The model: rows newest first, one per date; the date's first write sets previous*, every write rank/value.
    const model: RankHistoryRow[] = [];
    let version = 0;
    let current: number | null = null;
    const write = async (d: number, value: number) => {
      version++;
      const [change] = await index.apply([{ index: 'lb|d', userId: 'u', value, reachedAt: `${day(d)}T00:00:00.000Z`, date: day(d), version }]);
      expect(change).toMatchObject({ previousValue: current, value, rank: 1 });
      const at = model.findIndex((r) => r.date <= day(d));
      if (at >= 0 && model[at]?.date === day(d)) Object.assign(model[at] as RankHistoryRow, { rank: 1, value });
      else model.splice(at < 0 ? model.length : at, 0, { date: day(d), previousRank: current === null ? null : 1, rank: 1, previousValue: current, value });
      current = value;
    };
    // Every other day for 200 days: 100 rows, the newest on day 198.
    for (let d = 0; d < 200; d += 2) await write(d, d);
    for (const depth of [1, 2, 7, 8, 9, 10, 39, 40, 41, 42, 99]) {
      await write(198 - 2 * depth, 1000 + depth); // the date of the row at that depth: updated
      await write(199 - 2 * depth, 2000 + depth); // the day after it, a date no row has: inserted
    }
    await write(-5, 3000); // before the oldest row
    await write(-5, 3001); // and that row again, now the last one
    await write(150, 4000);
    expect(await index.readRankHistory('lb|d', 'u', 1000)).toEqual(model);
  });
});

/** A commitBatch for a store without one: its commits one after another, as the contract defines a batch. */
function sequentialBatch(store: Store): Store {
  return {
    ...store,
    async commitBatch(commits) {
      const out: BatchCommitOutcome[] = [];
      for (const c of commits) {
        try {
          out.push(await store.commit(c));
        } catch (error) {
          if (!isLaurelErrorCode(error, 'CONFLICT')) throw error;
          out.push(error as ConflictError);
        }
      }
      return out;
    },
  };
}

/**
 * Random commits of a few users, 0 to 3 board writes each. A user's commits come with consecutive expected
 * versions (as the contract requires); now and then one skips ahead, so it and the user's later ones are refused.
 */
function randomCommits(seed: number, n: number): Commit[] {
  const r = rng(seed);
  const next = new Map<string, number>();
  const out: Commit[] = [];
  for (let i = 0; i < n; i++) {
    const userId = r.pick(USERS);
    const expectedVersion = (next.get(userId) ?? 0) + (r.next() < 0.06 ? 2 : 0);
    next.set(userId, expectedVersion + 1);
    const leaderboard: LeaderboardWrite[] = [];
    for (let k = r.int(4); k > 0; k--) {
      const index = r.pick(INDEXES);
      const date = r.pick(['2026-02-01', '2026-02-02']);
      const extra = { ...(index === 'pt|xp' ? { unranked: true } : {}), ...(r.next() < 0.5 ? { thresholdRank: 1 + r.int(5) } : {}) };
      leaderboard.push(r.next() < 0.15 ? { index, userId, remove: true, date, ...extra } : { index, userId, value: r.pick(VALUES), reachedAt: r.pick(INSTANTS), date, ...extra });
    }
    out.push({ userId, expectedVersion, state: sampleState(userId, String(i)), ledger: [], leaderboard, counters: {}, idempotency: null });
  }
  return out;
}

describe.skipIf(!REDIS_URL)('withRankIndex.commitBatch on Redis (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await redis?.quit();
  });

  for (const seed of [11, 12, 13, 14]) {
    it(`gives each commit the rank changes of sequential commits, in one script for the whole batch (seed ${seed})`, async () => {
      const commits = randomCommits(seed, 60);
      const batchRedis = counting(redis as Redis);
      const batchIndex = createRedisRankIndex({ redis: batchRedis, prefix: `${uniq(`cb${seed}`)}:` });
      const seqIndex = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq(`cs${seed}`)}:` });
      const batched = withRankIndex(sequentialBatch(createMemoryStore()), batchIndex);
      const sequential = withRankIndex(createMemoryStore(), seqIndex);
      const outcomes = (await batched.commitBatch?.(commits)) as BatchCommitOutcome[];
      expect(batchRedis.sent.filter((c) => c !== 'EVAL')).toEqual(['EVALSHA']);
      const expected: BatchCommitOutcome[] = [];
      for (const c of commits) {
        try {
          expected.push(await sequential.commit(c));
        } catch (error) {
          expected.push(error as ConflictError);
        }
      }
      expect(outcomes.map((o) => (o instanceof ConflictError ? 'conflict' : o))).toEqual(expected.map((o) => (o instanceof ConflictError ? 'conflict' : o)));
      expect(outcomes.filter((o) => o instanceof ConflictError).length).toBeGreaterThan(0);
      expect(outcomes.some((o) => !(o instanceof ConflictError) && o.ranks.some((x) => x.threshold !== undefined))).toBe(true);
      expect(await snapshot(batchIndex)).toEqual(await snapshot(seqIndex));
    });
  }

  it('with the memory store\'s own commitBatch, when it has one, too', async (ctx) => {
    const store = createMemoryStore();
    if (typeof store.commitBatch !== 'function') return ctx.skip();
    const commits = randomCommits(21, 40);
    const batched = withRankIndex(store, createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('own-b')}:` }));
    const sequential = withRankIndex(createMemoryStore(), createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('own-s')}:` }));
    const outcomes = (await batched.commitBatch?.(commits)) as BatchCommitOutcome[];
    const expected: unknown[] = [];
    for (const c of commits) expected.push(await sequential.commit(c).catch((e: unknown) => (isLaurelErrorCode(e, 'CONFLICT') ? 'conflict' : Promise.reject(e))));
    expect(outcomes.map((o) => (o instanceof ConflictError ? 'conflict' : o))).toEqual(expected);
  });
});
