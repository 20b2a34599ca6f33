/**
 * `rebuildRankIndex` makes the Redis index equal to the store's entries exactly: it copies what the store has
 * and removes what the store no longer has (members who left a breakdown group or fell to 0 while Redis was
 * down), and never undoes a write newer than the rebuild that lands while it runs.
 */
import { PGlite } from '@electric-sql/pglite';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../src/errors.js';
import { createEngine, defineConfig } from '../src/index.js';
import { createPostgresStore, type PostgresStore } from '../src/postgres.js';
import { createRedisRankIndex, rebuildRankIndex, withRankIndex, type RankIndex, type RankIndexSource } from '../src/redis.js';
import { REDIS_URL, uniq } from './servers.js';

const config = defineConfig({
  metrics: [{ key: 'm', name: 'M' }],
  attributes: [{ key: 'city', name: 'City', type: 'user' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }] }],
  leaderboards: [
    { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'm', start: '2020-01-01' },
    { key: 'city', name: 'By city', rankBy: 'metric', metricKey: 'm', start: '2020-01-01', breakdownAttributes: ['city'] },
  ],
});
const ALL = 'lb|all|2020-01-01|';
const ROME = 'lb|city|2020-01-01|["rome"]';
const PARIS = 'lb|city|2020-01-01|["paris"]';
const XP = 'pt|xp';
const INDEXES = [ALL, ROME, PARIS, XP];

describe.skipIf(!REDIS_URL)('rebuildRankIndex: exact, and never undoing newer writes (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  const db = new PGlite();
  let n = 0;
  afterAll(async () => {
    await redis?.quit();
    await db.close();
  });

  /** Postgres (PGlite) + Redis ranks, with a switch that makes every rank-index write fail ("Redis is down"). */
  async function setup() {
    const pg = createPostgresStore({ client: db, schema: `rebuild_exact_${++n}`, ranks: 'none' });
    await pg.migrate();
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('rebuild-exact')}:` });
    const sw = { down: false };
    const flaky: RankIndex = { ...index, apply: (w) => (sw.down ? Promise.reject(new StorageUnavailableError('redis down')) : index.apply(w)) };
    const missed: unknown[] = [];
    const engine = createEngine({ config, store: withRankIndex(pg, flaky, { onError: (e) => missed.push(e) }) });
    const ev = (id: string, value: number, city: string) => engine.recordEvent('m', { user: { id, attributes: { city } }, value });
    // Twelve users, half in Rome, half in Paris.
    for (let i = 0; i < 12; i++) await ev(`u${i}`, 1 + (i % 5), i % 2 ? 'paris' : 'rome');
    for (const ix of INDEXES) expect(await index.readRange(ix, 0, 1000), ix).toEqual(await pg.readRange(ix, 0, 1000));
    // Redis is down: u0 leaves Rome for Paris, u1 falls to 0, u2 and u4 climb, a new user arrives.
    sw.down = true;
    await ev('u0', 3, 'paris');
    const u1 = await ev('u1', -2, 'paris');
    expect(u1.total).toBe(0);
    await ev('u2', 10, 'rome');
    await ev('u4', 1, 'rome');
    await ev('new', 4, 'rome');
    sw.down = false;
    expect(missed).toHaveLength(5);
    // The Postgres truth: u0 only in Paris, u1 nowhere; Redis still has both where they were.
    expect((await pg.readRange(ROME, 0, 100)).map((e) => e.userId)).not.toContain('u0');
    expect((await pg.readRange(ALL, 0, 100)).map((e) => e.userId)).not.toContain('u1');
    expect((await index.readRange(ROME, 0, 100)).map((e) => e.userId)).toContain('u0');
    expect((await index.readRange(ALL, 0, 100)).map((e) => e.userId)).toContain('u1');
    return { pg, index, ev };
  }

  async function expectExact(pg: PostgresStore, index: RankIndex) {
    for (const ix of INDEXES) {
      const truth = await pg.readRange(ix, 0, 1000);
      expect(truth.length, ix).toBeGreaterThan(0);
      expect(await index.readRange(ix, 0, 1000), ix).toEqual(truth);
      expect(await index.countEntries(ix), ix).toBe(truth.length);
      for (const e of truth) expect(await index.getEntry(ix, e.userId), `${ix} ${e.userId}`).toEqual(e);
    }
    expect(await index.getEntry(ROME, 'u0')).toBeNull();
    expect(await index.getEntry(ALL, 'u1')).toBeNull();
    expect(await index.getEntry(PARIS, 'u1')).toBeNull();
  }

  it('removes members who left a breakdown group or fell to 0 while Redis was down, so the index equals the store', async () => {
    const { pg, index } = await setup();
    for (const ix of INDEXES) await rebuildRankIndex(pg, index, ix, { batch: 3 });
    await expectExact(pg, index);
    // Running it again changes nothing.
    for (const ix of INDEXES) await rebuildRankIndex(pg, index, ix, { batch: 5 });
    await expectExact(pg, index);
  });

  it('removes users the store does not know at all', async () => {
    const { pg, index } = await setup();
    await index.apply([{ index: ALL, userId: 'ghost', value: 99, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 40 }]);
    expect((await index.readRange(ALL, 0, 1))[0]?.userId).toBe('ghost');
    for (const ix of INDEXES) await rebuildRankIndex(pg, index, ix, { batch: 4 });
    await expectExact(pg, index);
    expect(await index.getEntry(ALL, 'ghost')).toBeNull();
  });

  it('keeps writes newer than the rebuild that land while it runs, at every step of it', async () => {
    const { pg, index, ev } = await setup();
    const fired: string[] = [];
    const once = async (label: string, when: boolean, f: () => Promise<unknown>) => {
      if (!when || fired.includes(label)) return;
      fired.push(label);
      await f();
    };
    // The source answers, then (before the rebuild acts on the answer) a newer event commits and reaches Redis.
    const source: RankIndexSource = {
      async scanEntries(ix, offset, limit) {
        const page = await pg.scanEntries(ix, offset, limit);
        // u5 climbs after the copy read its old value: the copy (older version) must not undo it.
        await once('copy', ix === ALL && page.some((e) => e.userId === 'u5'), () => ev('u5', 50, 'paris'));
        return page;
      },
      async loadUsers(ids) {
        const states = await pg.loadUsers(ids);
        // u1 (fell to 0 while down) comes back after its version was read: it must stay.
        await once('loadUsers', ids.includes('u1'), () => ev('u1', 6, 'paris'));
        return states;
      },
      async getEntry(ix, userId) {
        const entry = await pg.getEntry(ix, userId);
        // u0 (left Rome while down) returns to Rome after the store said it was not there: it must stay.
        await once('getEntry', ix === ROME && userId === 'u0' && entry === null, () => ev('u0', 1, 'rome'));
        return entry;
      },
    };
    for (const ix of INDEXES) await rebuildRankIndex(source, index, ix, { batch: 3 });
    expect(fired.sort()).toEqual(['copy', 'getEntry', 'loadUsers']);
    for (const ix of INDEXES) {
      const truth = await pg.readRange(ix, 0, 1000);
      expect(await index.readRange(ix, 0, 1000), ix).toEqual(truth);
    }
    expect(await index.getEntry(ALL, 'u5')).toMatchObject({ rank: 1, value: 51 });
    expect(await index.getEntry(ALL, 'u1')).toMatchObject({ value: 6 });
    expect(await index.getEntry(ROME, 'u0')).toMatchObject({ value: 5 });
    expect(await index.getEntry(PARIS, 'u0')).toBeNull();
  });
});

describe.skipIf(!REDIS_URL)('Redis rank index scanUsers (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await redis?.quit();
  });

  it('lists every user holding an entry once over a complete scan, with its version, and skips removed ones', async () => {
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('scan')}:` });
    const at = '2026-01-01T00:00:00.000Z';
    const ids = Array.from({ length: 700 }, (_, i) => (i % 3 === 0 ? `用户${i}` : `u|${i}`));
    await index.apply(ids.map((userId, i) => ({ index: 'i', userId, value: i + 1, reachedAt: at, date: '2026-01-01', version: i + 1 })));
    await index.apply(ids.filter((_, i) => i % 10 === 0).map((userId, i) => ({ index: 'i', userId, remove: true as const, date: '2026-01-01', version: 1000 + i })));
    const seen = new Map<string, number>();
    let cursor = '0';
    let pages = 0;
    do {
      const page = await index.scanUsers('i', cursor, 7);
      cursor = page.cursor;
      pages += 1;
      for (const u of page.users) seen.set(u.userId, u.version);
    } while (cursor !== '0');
    expect(pages).toBeGreaterThan(1);
    const expected = new Map(ids.flatMap((id, i) => (i % 10 === 0 ? [] : [[id, i + 1] as const])));
    expect(seen).toEqual(expected);
    expect(await index.scanUsers('missing', '0', 10)).toEqual({ cursor: '0', users: [] });
  });
});
