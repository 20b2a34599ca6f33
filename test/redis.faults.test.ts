/**
 * Fault test: an engine over Postgres + Redis ranks records events under load while the redis-server this
 * file spawned is stopped, kept down for a few seconds and started again (empty, on the same port). The
 * ioredis client has its default options. Needs LAUREL_PG_URL, LAUREL_REDIS_URL and `redis-server` on PATH.
 */
import Redis from 'ioredis';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isLaurelError } from '../src/errors.js';
import { createEngine, defineConfig, type EventResponse } from '../src/index.js';
import { createPostgresStore } from '../src/postgres.js';
import { createRedisRankIndex, rebuildRankIndex, withRankIndex } from '../src/redis.js';
import { HAS_REDIS_SERVER, spawnRedis } from './redis.server.js';
import { PG_URL, REDIS_URL, uniq } from './servers.js';

const CITIES = ['rome', 'paris', 'oslo'] as const;
const config = defineConfig({
  metrics: [{ key: 'm', name: 'M' }],
  attributes: [{ key: 'city', name: 'City', type: 'user' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-two-m', type: 'metric', metricKey: 'm', metricThreshold: 2, points: 3 }] }],
  leaderboards: [
    { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'm', start: '2020-01-01' },
    { key: 'city', name: 'By city', rankBy: 'metric', metricKey: 'm', start: '2020-01-01', breakdownAttributes: ['city'] },
  ],
});
// Index names as src/core/leaderboards.ts builds them (boardIndex, pointsTotalsIndex).
const ALL = 'lb|all|2020-01-01|';
const cityIndex = (city: string) => `lb|city|2020-01-01|${JSON.stringify([city])}`;
const INDEXES = [ALL, ...CITIES.map(cityIndex), 'pt|xp'];

interface Call {
  userId: string;
  key: string;
  value: number;
  city: string;
  startedAt: number;
  ms: number;
  phase: 'up' | 'down' | 'back';
  response?: EventResponse;
  error?: unknown;
}

const WORKERS = 8;
const USERS_PER_WORKER = 3;

describe.skipIf(!PG_URL || !REDIS_URL || !HAS_REDIS_SERVER)('Redis stops and comes back empty under load (needs LAUREL_PG_URL, LAUREL_REDIS_URL, redis-server)', () => {
  it('every call returns in bounded time, commits exactly what it reports, and a rebuild makes Redis equal Postgres again', async () => {
    const server = await spawnRedis();
    const pool = new pg.Pool({ connectionString: PG_URL, max: 12 });
    const schema = uniq('redis_faults').toLowerCase();
    const store = createPostgresStore({ client: pool, schema, ranks: 'none' });
    const redis = new Redis(server.url);
    redis.on('error', () => undefined); // only to keep ioredis from logging "Unhandled error event"
    try {
      await store.migrate();
      const rankIndex = createRedisRankIndex({ redis });
      const indexErrors: unknown[] = [];
      const degraded: unknown[] = [];
      const engine = createEngine({ config, store: withRankIndex(store, rankIndex, { onError: (e) => indexErrors.push(e) }), onDegraded: (e) => degraded.push(e) });

      let phase: Call['phase'] = 'up';
      let stop = false;
      const calls: Call[] = [];
      // Each worker owns its users, so the order of one user's calls is the worker's order.
      const worker = async (w: number) => {
        const users = Array.from({ length: USERS_PER_WORKER }, (_, i) => `w${w}u${i}`);
        const total = new Map(users.map((u) => [u, 0]));
        const city = new Map(users.map((u, i) => [u, CITIES[(w + i) % CITIES.length] as string]));
        for (let n = 0; !stop; n++) {
          const userId = users[n % users.length] as string;
          // Mostly climbs; every 7th call drops the user to exactly 0; every 5th moves them to another city.
          const value = n % 7 === 6 && (total.get(userId) as number) > 0 ? -(total.get(userId) as number) : 1 + ((n * 7 + w) % 5);
          if (n % 5 === 4) city.set(userId, CITIES[(CITIES.indexOf(city.get(userId) as (typeof CITIES)[number]) + 1) % CITIES.length] as string);
          const call: Call = { userId, key: `k-${w}-${n}`, value, city: city.get(userId) as string, startedAt: performance.now(), ms: 0, phase };
          try {
            call.response = await engine.recordEvent('m', { user: { id: userId, attributes: { city: call.city } }, value }, { idempotencyKey: call.key });
            total.set(userId, (total.get(userId) as number) + value);
          } catch (error) {
            call.error = error;
          }
          call.ms = performance.now() - call.startedAt;
          calls.push(call);
        }
      };
      const load = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
      const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
      await sleep(1500);
      phase = 'down';
      await server.stop();
      await sleep(3000);
      await server.start();
      phase = 'back';
      await sleep(3000);
      stop = true;
      await load;

      // Bounded time: no call waited for ioredis' retries.
      const worst = Math.max(...calls.map((c) => c.ms));
      expect(worst, `slowest call ${Math.round(worst)} ms`).toBeLessThan(3000);
      for (const p of ['up', 'down', 'back'] as const) expect(calls.filter((c) => c.phase === p).length, p).toBeGreaterThan(20);

      // Failures: only Laurel errors, each committing nothing. With Redis only on the rank path there are none.
      const failed = calls.filter((c) => c.error !== undefined);
      for (const c of failed) {
        expect(isLaurelError(c.error), String(c.error)).toBe(true);
        expect(await store.getIdempotencyRecord(c.userId, 'm', c.key), c.key).toBeNull();
      }
      expect(failed.map((c) => String(c.error))).toEqual([]);

      // Redis' outage was felt: committed events answered with null ranks, and the index reported its errors.
      const down = calls.filter((c) => c.phase === 'down' && c.response);
      expect(down.length).toBeGreaterThan(0);
      const nullRanks = down.filter((c) => (c.response?.leaderboards.all?.value ?? 0) > 0 && c.response?.leaderboards.all?.rank === null);
      expect(nullRanks.length, 'committed events answered with rank: null while Redis was down').toBeGreaterThan(0);
      expect(indexErrors.length + degraded.length).toBeGreaterThan(0);

      // Every success is in the Postgres ledger (and its idempotency record), and nothing else is.
      const users = [...new Set(calls.map((c) => c.userId))];
      for (const userId of users) {
        const mine = calls.filter((c) => c.userId === userId && c.response);
        const ledger = await store.readLedger({ userId, kind: 'metric', key: 'm', order: 'asc' });
        expect(ledger.map((r) => r.id).sort(), userId).toEqual(mine.map((c) => c.response?.eventId).sort());
        for (const c of mine) expect(await store.getIdempotencyRecord(userId, 'm', c.key), c.key).toMatchObject({ eventId: c.response?.eventId });
      }

      // Totals and board entries equal a sequential model of the successful calls.
      const model = new Map<string, { total: number; city: string }>();
      for (const c of calls) {
        if (!c.response) continue;
        const m = model.get(c.userId) ?? { total: 0, city: c.city };
        model.set(c.userId, { total: m.total + c.value, city: c.city });
      }
      const states = await store.loadUsers(users);
      for (const [i, userId] of users.entries()) {
        const m = model.get(userId);
        expect(Number(states[i]?.state.metrics.m ?? 0), userId).toBe(m?.total ?? 0);
      }
      const expectedAll = [...model].filter(([, m]) => m.total > 0).map(([userId, m]) => [userId, m.total]);
      const sortPairs = (p: (string | number)[][]) => p.sort((a, b) => String(a[0]).localeCompare(String(b[0])));
      expect(sortPairs((await store.readRange(ALL, 0, 1000)).map((e) => [e.userId, e.value]))).toEqual(sortPairs(expectedAll));
      for (const city of CITIES) {
        const expected = [...model].filter(([, m]) => m.total > 0 && m.city === city).map(([userId, m]) => [userId, m.total]);
        expect(sortPairs((await store.readRange(cityIndex(city), 0, 1000)).map((e) => [e.userId, e.value])), city).toEqual(sortPairs(expected));
      }

      // Redis came back empty, so it misses entries; the rebuild makes every index equal Postgres exactly.
      const before = await Promise.all(INDEXES.map(async (ix) => JSON.stringify(await rankIndex.readRange(ix, 0, 1000)) === JSON.stringify(await store.readRange(ix, 0, 1000))));
      expect(before.every(Boolean), 'Redis already equal to Postgres before the rebuild').toBe(false);
      for (const ix of INDEXES) await rebuildRankIndex(store, rankIndex, ix, { batch: 7 });
      for (const ix of INDEXES) {
        const truth = await store.readRange(ix, 0, 1000);
        expect(truth.length, ix).toBeGreaterThan(0);
        expect(await rankIndex.readRange(ix, 0, 1000), ix).toEqual(truth);
      }
      // And the engine ranks again.
      const top = (await store.readRange(ALL, 0, 1))[0];
      expect((await engine.getLeaderboard('all')).rankings[0]).toMatchObject({ userId: top?.userId, rank: 1 });

      const by = (p: Call['phase']) => calls.filter((c) => c.phase === p).map((c) => c.ms);
      const pct = (xs: number[], q: number) => Math.round([...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? 0);
      console.info(
        `redis faults: ${calls.length} calls, ${failed.length} failed, ${indexErrors.length} index write errors, ${degraded.length} degraded reads; ` +
          (['up', 'down', 'back'] as const).map((p) => `${p}: ${by(p).length} calls p50 ${pct(by(p), 0.5)} ms p99 ${pct(by(p), 0.99)} ms`).join('; ') +
          `; max ${Math.round(worst)} ms`,
      );
    } finally {
      redis.disconnect();
      await server.stop();
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await pool.end();
    }
  });
});
