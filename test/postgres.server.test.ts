import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { compareEntries, createEngine, isLaurelError, isLaurelErrorCode, withRankIndex, type LaurelError, type Store } from '../src/index.js';
import { createPostgresStore } from '../src/postgres.js';
import { createRedisRankIndex } from '../src/redis.js';
import { sequentialIds } from '../src/testing/index.js';
import { describeStoreConformance } from '../src/testing/vitest.js';
import { PG_URL, REDIS_URL, uniq } from './servers.js';
import { DISTINCT, multiConfig, plannedEvent, PROCESSES, USERS } from './workers/shared.js';

/** An award row's trigger type: compact rows (0.2) name it, older rows hold the whole award. */
const awardType = (data: unknown) => {
  const d = data as { type?: string; trigger?: string | { type?: string } };
  return typeof d.trigger === 'string' ? d.type : d.trigger?.type;
};

const run = promisify(execFile);

describe.skipIf(!PG_URL)('PostgreSQL server (needs LAUREL_PG_URL)', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 10 });
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await pool.end();
    await redis?.quit();
  });

  async function fresh(ranks: 'sql' | 'none' = 'sql') {
    const store = createPostgresStore({ client: pool, schema: uniq('lt'), ranks });
    await store.migrate();
    return store;
  }

  describeStoreConformance('postgres (server, pg Pool)', () => fresh());

  it('a backend killed mid-commit (pg_terminate_backend) leaves no partial state; the retry completes the call', async () => {
    const schema = uniq('kill');
    // One connection, so the backend to kill is known. The commit is one statement: a second connection holds
    // the lock of the user's leaderboard entry, so the statement, having written the user's row, waits there;
    // then its backend is terminated. No 'error' listeners of the test's own: the store's must be enough.
    const single = new pg.Pool({ connectionString: PG_URL, max: 1 });
    const killer = new pg.Pool({ connectionString: PG_URL, max: 2 });
    let armed = false;
    let killedWhileWaiting = false;
    const client = {
      totalCount: 0,
      on: (event: string, listener: (...a: unknown[]) => void) => single.on(event as 'error', listener),
      connect: async () => {
        const conn = await single.connect();
        const pid = (conn as unknown as { processID: number }).processID;
        // A wrapper, not a patch: the pool calls the client's own query with callbacks.
        return {
          processID: pid,
          on: (event: string, listener: (...a: unknown[]) => void) => conn.on(event as 'error', listener),
          removeListener: (event: string, listener: (...a: unknown[]) => void) => conn.removeListener(event, listener),
          query: async (text: string, params?: unknown[]) => {
            if (!armed || !text.includes('.commit_batch(')) return conn.query(text, params);
            armed = false;
            const blocker = await killer.connect();
            await blocker.query('BEGIN');
            await blocker.query(`SELECT 1 FROM "${schema}".entries WHERE idx = $1 AND user_id = $2 FOR UPDATE`, ['lb|all|2020-01-01|', 'k']);
            const running = conn.query(text, params);
            running.catch(() => undefined);
            for (let i = 0; i < 500 && !killedWhileWaiting; i++) {
              const r = await killer.query(`SELECT wait_event_type, query FROM pg_stat_activity WHERE pid = $1`, [pid]);
              if (r.rows[0]?.wait_event_type === 'Lock' && String(r.rows[0]?.query).includes('commit_batch')) {
                await killer.query('SELECT pg_terminate_backend($1)', [pid]);
                killedWhileWaiting = true;
              } else await new Promise((resolve) => setTimeout(resolve, 10));
            }
            await blocker.query('ROLLBACK');
            blocker.release();
            return running;
          },
          release: (err?: Error | boolean) => conn.release(err),
        };
      },
      query: (text: string, params?: unknown[]) => single.query(text, params),
    };
    const store = createPostgresStore({ client: client as never, schema });
    await store.migrate();
    let now = Date.parse('2026-01-05T10:00:00Z');
    const engine = createEngine({ config: multiConfig, store, clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('lessons', { user: { id: 'k' }, value: 49 }, { idempotencyKey: 'a' });
    now += 60_000;
    const before = await store.loadUser('k');
    armed = true;
    await expect(engine.recordEvent('lessons', { user: { id: 'k' }, value: 1 }, { idempotencyKey: 'b' })).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE', committed: false });
    expect(killedWhileWaiting).toBe(true);
    expect(await store.loadUser('k')).toEqual(before);
    expect(await store.readLedger({ userId: 'k', kind: 'points', key: 'xp', order: 'asc' })).toHaveLength(1);
    expect(await store.getIdempotencyRecord('k', 'lessons', 'b')).toBeNull();
    const retry = await engine.recordEvent('lessons', { user: { id: 'k' }, value: 1 }, { idempotencyKey: 'b' });
    expect(retry).toMatchObject({ total: 50, idempotentReplayed: false, achievements: [{ key: 'fifty' }], points: { xp: { total: 600 } } });
    expect(await store.readLedger({ userId: 'k', kind: 'points', key: 'xp', order: 'asc' })).toHaveLength(3);
    await single.end();
    await killer.end();
  }, 60_000);

  it('a plain pg.Pool with no error listeners survives backends terminated mid-load: every store failure is a Laurel error, and calls succeed afterwards', async () => {
    const app = uniq('drop');
    // Exactly as the README shows: no 'error' listener on the pool or on its clients.
    const plain = new pg.Pool({ connectionString: PG_URL, max: 6, application_name: app });
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    const observed: unknown[] = [];
    try {
      const store = createPostgresStore({ client: plain, schema: uniq('drop'), onError: (e) => observed.push(e) });
      await store.migrate();
      // Every rejection of a store method, as the store itself gives it (the engine would type it again).
      const failures: unknown[] = [];
      const spy = new Proxy(store, {
        get: (target, key) => {
          const v = Reflect.get(target, key) as unknown;
          return typeof v === 'function'
            ? (...args: unknown[]) =>
                (v as (...a: unknown[]) => Promise<unknown>).apply(target, args).catch((e: unknown) => {
                  failures.push(e);
                  throw e;
                })
            : v;
        },
      });
      const engine = createEngine({ config: multiConfig, store: spy });
      let stop = false;
      let n = 0;
      const worker = async (w: number) => {
        while (!stop) {
          const i = n++;
          await engine.recordEvent('lessons', { user: { id: `d${i % 12}` }, value: 1 }, { idempotencyKey: `w${w}-${i}` }).catch(() => undefined);
          await spy.readRange('lb|all|2020-01-01|', 0, 5).catch(() => undefined);
        }
      };
      const workers = Array.from({ length: 8 }, (_, w) => worker(w));
      // Kill every backend of the pool, busy or idle, ten times.
      for (let k = 0; k < 10; k++) {
        await new Promise((r) => setTimeout(r, 150));
        await pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
      }
      stop = true;
      await Promise.all(workers);
      // Once more with the pool's clients idle: under load the kills above may each have found every client
      // busy (8 workers on 6 clients), and the idle-client path (the pool's 'error' event) must be taken too.
      await pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
      // Until the pool has dropped every killed client (each reports its end as an 'error' event).
      for (let i = 0; i < 150 && plain.totalCount > 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(uncaught).toEqual([]);
      expect(failures.length).toBeGreaterThan(0);
      for (const f of failures) {
        expect(isLaurelError(f), String(f)).toBe(true);
        expect(['STORAGE_UNAVAILABLE', 'CONFLICT']).toContain((f as LaurelError).code);
        if (isLaurelErrorCode(f, 'STORAGE_UNAVAILABLE')) expect((f as LaurelError).cause).toBeDefined();
      }
      // Idle pooled clients were killed too: the pool reported them through the store's onError.
      expect(observed.length).toBeGreaterThan(0);
      // No manual step: the next calls succeed on fresh connections.
      for (let i = 0; i < 20; i++) await engine.recordEvent('lessons', { user: { id: `d${i % 12}` }, value: 1 }, { idempotencyKey: `after-${i}` });
      expect(await spy.readRange('lb|all|2020-01-01|', 0, 12)).toHaveLength(12);
    } finally {
      process.off('uncaughtException', onUncaught);
      await plain.end();
    }
  }, 60_000);

  async function verify(store: Store) {
    const expected = new Map<string, number>();
    for (let d = 0; d < DISTINCT; d++) {
      const e = plannedEvent(d);
      expected.set(e.userId, (expected.get(e.userId) ?? 0) + e.value);
    }
    const states = await store.loadUsers([...expected.keys()]);
    let fifty = 0;
    let hundred = 0;
    for (const loaded of states) {
      expect(loaded).not.toBeNull();
      const s = loaded?.state;
      if (!s) continue;
      const total = expected.get(s.user.id) as number;
      expect(Number(s.metrics.lessons)).toBe(total);
      expect(await store.readLedger({ userId: s.user.id, kind: 'metric', key: 'lessons', order: 'asc' })).toHaveLength(DISTINCT / USERS);
      const awards = await store.readLedger({ userId: s.user.id, kind: 'points', key: 'xp', order: 'asc' });
      expect(awards.reduce((sum, a) => sum + a.delta, 0)).toBe(total * 10 + (total >= 50 ? 100 : 0));
      expect(awards.filter((a) => awardType(a.data) === 'achievement')).toHaveLength(total >= 50 ? 1 : 0);
      expect(s.points.xp?.total).toBe(total * 10 + (total >= 50 ? 100 : 0));
      if (s.achievements.fifty) fifty++;
      if (s.achievements.hundred) hundred++;
      expect(Boolean(s.achievements.fifty)).toBe(total >= 50);
    }
    expect(await store.getCounters(['users', 'achievement:fifty', 'achievement:hundred'])).toEqual({ users: USERS, 'achievement:fifty': fifty, 'achievement:hundred': hundred });
    // Ranks from scratch: every user's (value, reachedAt) from their committed state, sorted.
    const scratch = states
      .map((l) => ({ userId: l?.state.user.id as string, value: Number(l?.state.leaderboards.all?.value), reachedAt: l?.state.leaderboards.all?.reachedAt as string }))
      .sort(compareEntries);
    const board = await store.readRange('lb|all|2020-01-01|', 0, USERS + 10);
    expect(board.map((b) => [b.userId, b.rank, b.value, b.reachedAt])).toEqual(scratch.map((e, i) => [e.userId, i + 1, e.value, e.reachedAt]));
    for (const e of scratch.slice(0, 20)) expect((await store.getEntry('lb|all|2020-01-01|', e.userId))?.rank).toBe(scratch.indexOf(e) + 1);
  }

  async function multiProcess(withRedis: boolean) {
    const schema = uniq('multi');
    const prefix = withRedis ? `${uniq('multi')}:` : '';
    const pgStore = createPostgresStore({ client: pool, schema, ranks: withRedis ? 'none' : 'sql' });
    await pgStore.migrate();
    const outputs = await Promise.all(
      Array.from({ length: PROCESSES }, (_, w) =>
        run(process.execPath, ['--import', 'tsx', 'test/workers/record.ts', String(w), schema, ...(withRedis ? [prefix] : [])], { env: process.env, maxBuffer: 1 << 24 }),
      ),
    );
    const reports = outputs.map((o) => JSON.parse(o.stdout.trim().split('\n').pop() as string) as { applied: number; replayed: number });
    expect(reports.reduce((s, r) => s + r.applied, 0)).toBe(DISTINCT);
    expect(reports.reduce((s, r) => s + r.replayed, 0)).toBe(20_000 - DISTINCT);
    const store = withRedis ? withRankIndex(pgStore, createRedisRankIndex({ redis: redis as Redis, prefix })) : pgStore;
    await verify(store);
    if (withRedis) {
      // Redis ranks agree with the entries Postgres holds.
      const fromPg = await pgStore.readRange('lb|all|2020-01-01|', 0, USERS + 10);
      expect((await store.readRange('lb|all|2020-01-01|', 0, USERS + 10)).map((e) => [e.userId, e.value])).toEqual(fromPg.map((e) => [e.userId, e.value]));
    }
  }

  it('4 processes, 20 000 events, 200 users, duplicate keys across processes: nothing lost, nothing twice, ranks exact', () => multiProcess(false), 600_000);
  it.skipIf(!REDIS_URL)('the same with Redis ranks', () => multiProcess(true), 600_000);
});
