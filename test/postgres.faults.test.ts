/**
 * Faults against a real server: an engine on the PostgreSQL store records events (8 in flight, each with its
 * own idempotency key and a known value) while backends are terminated (pg_terminate_backend), then the
 * server is stopped (`pg_ctl stop -m fast`) and started again. The process must survive without any error
 * listener of the test's own; every failure must be a Laurel error; no call reported as failed may be
 * committed, no call reported as succeeded may be missing; each user's totals must equal a sequential model
 * of the successful calls; calls after the restart must succeed. Runs on a throwaway cluster of its own
 * (test/pg-cluster.ts), never on the shared server; skipped unless LAUREL_PG_URL is set and PostgreSQL's
 * binaries are found (LAUREL_PG_BIN, else /usr/lib/postgresql/<version>/bin).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelError, type LaurelError } from '../src/index.js';
import { createPostgresStore, type PostgresStore } from '../src/postgres.js';
import { createPgCluster, findPgBin, type PgCluster } from './pg-cluster.js';
import { PG_URL, uniq } from './servers.js';

/** An award row's trigger type: compact rows (0.2) name it, older rows hold the whole award. */
const awardType = (data: unknown) => {
  const d = data as { type?: string; trigger?: string | { type?: string } };
  return typeof d.trigger === 'string' ? d.type : d.trigger?.type;
};

const BIN = findPgBin();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'ten', name: 'Ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10 }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'ten-lessons', type: 'achievement', achievementKey: 'ten', points: 100 }] }],
  leaderboards: [{ key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' }],
});
const BOARD = 'lb|all|2020-01-01|';
const USERS = 16;

interface Call {
  key: string;
  user: string;
  value: number;
  started: number;
  outcome: 'ok' | 'failed' | 'unknown';
  eventId?: string;
  error?: unknown;
}

describe.skipIf(!PG_URL || !BIN)('PostgreSQL faults on a throwaway server (pg_terminate_backend, pg_ctl stop -m fast, start)', () => {
  let cluster: PgCluster;
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);
  beforeAll(async () => {
    cluster = await createPgCluster(BIN as string);
    process.on('uncaughtException', onUncaught);
  }, 120_000);
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await cluster?.destroy();
  }, 120_000);

  /** A short-lived admin connection (the test's own, not the store's). */
  async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ connectionString: cluster.url });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /**
   * The load with the chaos next to it, then the checks. `store` is what the engine runs on; `app` is the
   * application_name of its connections, so that only they are terminated.
   */
  async function scenario(makeStore: (app: string) => { store: PostgresStore; close: () => Promise<unknown> }) {
    const app = uniq('fault');
    const { store, close } = makeStore(app);
    await store.migrate();
    const engine = createEngine({ config, store });
    const calls: Call[] = [];
    let stop = false;
    let seq = 0;
    const record = async (c: Call) => {
      try {
        const r = await engine.recordEvent('lessons', { user: { id: c.user }, value: c.value }, { idempotencyKey: c.key });
        c.outcome = 'ok';
        c.eventId = r.eventId;
      } catch (error) {
        c.error = error;
        c.outcome = isLaurelError(error) && (error as LaurelError & { committed?: unknown }).committed === 'unknown' ? 'unknown' : 'failed';
      }
    };
    const worker = async () => {
      while (!stop) {
        const i = seq++;
        const c: Call = { key: `k${i}`, user: `u${i % USERS}`, value: 1 + (i % 3), started: Date.now(), outcome: 'failed' };
        calls.push(c);
        await record(c);
        // A client that backs off a little after a failure, so that a down server is not spun against.
        if (c.outcome !== 'ok') await sleep(50);
      }
    };
    const workers = Array.from({ length: 8 }, () => worker());

    // The chaos: random backends terminated, then a fast stop, a second of downtime, a start.
    await sleep(1_500);
    let terminated = 0;
    for (let k = 0; k < 5; k++) {
      terminated += await admin(async (c) => {
        const r = await c.query(
          `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM (SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY random() LIMIT 2) AS victims`,
          [app],
        );
        return Number(r.rows[0].n);
      });
      await sleep(700);
    }
    await cluster.stop('fast');
    const stoppedAt = Date.now();
    await sleep(1_000);
    await cluster.start();
    const restartedAt = Date.now();
    await sleep(5_000);
    stop = true;
    await Promise.all(workers);

    // Calls after the restart succeed (one second of grace for calls that were waiting on the old server).
    const afterRestart = calls.filter((c) => c.started > restartedAt + 1_000);
    expect(afterRestart.length).toBeGreaterThan(20);
    expect(afterRestart.filter((c) => c.outcome !== 'ok').map((c) => String(c.error))).toEqual([]);
    const more: Call[] = Array.from({ length: 16 }, (_, j) => ({ key: `after${j}`, user: `u${j % USERS}`, value: 1, started: Date.now(), outcome: 'failed' as const }));
    await Promise.all(more.map(record));
    expect(more.filter((c) => c.outcome !== 'ok').map((c) => String(c.error))).toEqual([]);
    calls.push(...more);

    // Every failure is a Laurel error: unavailable storage or a conflict, never a raw driver error.
    const failed = calls.filter((c) => c.outcome !== 'ok');
    expect(failed.length).toBeGreaterThan(0);
    for (const c of failed) {
      expect(isLaurelError(c.error), String(c.error)).toBe(true);
      expect(['STORAGE_UNAVAILABLE', 'CONFLICT']).toContain((c.error as LaurelError).code);
    }
    // Unknown outcomes are rare, and a retry with the same key settles them (a replay if it had committed).
    const unknown = calls.filter((c) => c.outcome === 'unknown');
    expect(unknown.length).toBeLessThanOrEqual(Math.max(2, calls.length * 0.01));
    for (const c of unknown) {
      await record(c);
      expect(c.outcome).toBe('ok');
    }

    // No call reported as failed was committed; none reported as succeeded is missing.
    const ok = calls.filter((c) => c.outcome === 'ok');
    const lost = calls.filter((c) => c.outcome === 'failed');
    for (const c of lost) expect(await store.getIdempotencyRecord(c.user, 'lessons', c.key), c.key).toBeNull();
    for (const c of ok) expect((await store.getIdempotencyRecord(c.user, 'lessons', c.key))?.eventId, c.key).toBe(c.eventId);

    // Each user's state equals the sequential model of the successful calls.
    const totals = new Map<string, number>();
    for (const c of ok) totals.set(c.user, (totals.get(c.user) ?? 0) + c.value);
    for (let u = 0; u < USERS; u++) {
      const user = `u${u}`;
      const total = totals.get(user) ?? 0;
      const xp = total * 10 + (total >= 10 ? 100 : 0);
      const loaded = await store.loadUser(user);
      if (total === 0) {
        expect(loaded).toBeNull();
        continue;
      }
      const s = loaded?.state;
      expect(Number(s?.metrics.lessons), user).toBe(total);
      expect(s?.points.xp?.total, user).toBe(xp);
      expect(Boolean(s?.achievements.ten), user).toBe(total >= 10);
      // Exactly the successful calls' metric rows, by event id: a failed call left none.
      const metricRows = await store.readLedger({ userId: user, kind: 'metric', key: 'lessons', order: 'asc' });
      expect(metricRows.map((r) => r.id).sort(), user).toEqual(ok.filter((c) => c.user === user).map((c) => c.eventId).sort());
      const awards = await store.readLedger({ userId: user, kind: 'points', key: 'xp', order: 'asc' });
      expect(awards.reduce((sum, a) => sum + a.delta, 0), user).toBe(xp);
      expect(awards.filter((a) => awardType(a.data) === 'achievement'), user).toHaveLength(total >= 10 ? 1 : 0);
    }
    const users = [...totals.keys()];
    expect(await store.getCounters(['users', 'achievement:ten'])).toEqual({ users: users.length, 'achievement:ten': users.filter((u) => (totals.get(u) as number) >= 10).length });
    const board = await store.readRange(BOARD, 0, USERS + 1);
    expect(new Map(board.map((e) => [e.userId, e.value]))).toEqual(new Map(users.map((u) => [u, totals.get(u)])));
    expect(board.map((e) => e.rank)).toEqual(board.map((_, i) => i + 1));

    // The process is alive (this line runs) and nothing was thrown past the store.
    expect(uncaught).toEqual([]);
    await close();
    return { calls: calls.length, ok: ok.length, failed: lost.length, unknown: unknown.length, terminated, downtimeMs: restartedAt - stoppedAt };
  }

  it('a pg Pool passed as is, no error listeners', async () => {
    const summary = await scenario((app) => {
      const pool = new pg.Pool({ connectionString: cluster.url, max: 8, application_name: app });
      return { store: createPostgresStore({ client: pool }), close: () => pool.end() };
    });
    console.log('pool:', summary);
  }, 120_000);

  it('one connection (serial mode) that the store replaces through its connect factory when it breaks', async () => {
    const summary = await scenario((app) => {
      const opened: pg.Client[] = [];
      const store = createPostgresStore({
        schema: 'laurel_single',
        connect: () => {
          const c = new pg.Client({ connectionString: cluster.url, application_name: app });
          opened.push(c);
          return c;
        },
      });
      return { store, close: () => Promise.all(opened.map((c) => c.end().catch(() => undefined))) };
    });
    console.log('single connection:', summary);
  }, 120_000);
});
