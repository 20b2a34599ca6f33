/**
 * The differential test: the same random calls (events, identify, updates, completions, accrue, reads, clock
 * moves, operator operations: freezes, restores, pauses, preferences, points adjustments, boosts, erasure and
 * reset), hostile strings, numbers at the bounds and keys named after Object.prototype members included, go
 * to an engine on the memory store (on recordEvent's direct path, and with a store hook off it), on the
 * PostgreSQL store (the real server when LAUREL_PG_URL is set, else PGlite) and on PostgreSQL with Redis
 * ranks (when LAUREL_REDIS_URL is set). Every response (or error code) and every final state must be
 * identical: a rule that holds on one store and not another is a bug. Calls go to the default tenant and to
 * two others (`engine.tenant`, ids differing only in case), bad tenant ids included: every tenant's answers,
 * states and change events must be identical too.
 */
import { PGlite } from '@electric-sql/pglite';
import fc from 'fast-check';
import Redis from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelError, withRankIndex, type Store } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { createPostgresStore } from '../src/postgres.js';
import { createRedisRankIndex } from '../src/redis.js';
import { sequentialIds } from '../src/testing/index.js';
import { PG_URL, REDIS_URL, uniq } from './servers.js';
import { allChanges } from './helpers.js';

const config = defineConfig({
  timeZone: 'America/Santiago',
  metrics: [{ key: 'toString', name: 'Lessons' }, { key: 'quiz', name: 'Quizzes' }],
  attributes: [{ key: 'valueOf', name: 'Plan', type: 'user' }, { key: 'device', name: 'Device', type: 'event' }],
  achievements: [
    { key: 'hasOwnProperty', name: 'Three', trigger: 'metric', metricKey: 'toString', metricValue: 3 },
    { key: 'pro', name: 'Pro two', trigger: 'metric', metricKey: 'toString', metricValue: 2, userAttributes: { valueOf: 'pro' } },
    { key: 'ios', name: 'On device', trigger: 'metric', metricKey: 'quiz', metricValue: 2, eventAttributes: { device: 'ios' } },
    { key: 'valueOf', name: 'Onboarded', trigger: 'api' },
    { key: 'streak2', name: 'Two days', trigger: 'streak', streakLength: 2 },
    { key: 'all', name: 'All', trigger: 'achievement', achievementKeys: ['hasOwnProperty', 'valueOf'] },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 3, amount: 1 } } },
  pointsSystems: [
    {
      key: 'toString',
      name: 'XP',
      levels: [{ key: 'a', name: 'A', points: 0 }, { key: 'b', name: 'B', points: 100 }],
      triggers: [
        { key: 'toString', type: 'metric', metricKey: 'toString', metricThreshold: 1, points: 10 },
        { key: 'valueOf', type: 'achievement', achievementKey: 'valueOf', points: 50 },
        { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 5 },
        { key: 'per-quiz', type: 'metric', metricKey: 'quiz', metricThreshold: 1, points: 1_000_000_000_000_000 },
      ],
    },
    { key: 'energy', name: 'Energy', maxPoints: 3, triggers: [{ key: 'signup', type: 'user_creation', points: 3 }, { key: 'daily-refill', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1 }, { key: 'per-quiz', type: 'metric', metricKey: 'quiz', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }] },
  ],
  leaderboards: [
    { key: 'valueOf', name: 'Weekly', rankBy: 'metric', metricKey: 'toString', start: '2026-01-05', runUnit: 'day', runInterval: 7 },
    { key: 'by-plan', name: 'By plan', rankBy: 'points', pointsSystemKey: 'toString', start: '2026-01-01', breakdownAttributes: ['valueOf'], maxParticipants: 3 },
    { key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2026-01-01' },
    // Boards that end while the calls run: one that does not repeat, and one whose end cuts its last run short.
    { key: 'sprint', name: 'Sprint', rankBy: 'metric', metricKey: 'toString', start: '2026-01-03', end: '2026-01-09' },
    { key: 'threes', name: 'Threes', rankBy: 'metric', metricKey: 'toString', start: '2026-01-05', end: '2026-01-08', runUnit: 'day', runInterval: 3, maxParticipants: 2 },
  ],
});

// Hostile but valid ids (code-unit order differs from UTF-8 byte order between U+E000 and U+1F600), plus
// strings every store must refuse alike.
const USERS = ['a', '\uE000', '😀', 'toString', '__proto__', 'x'.repeat(255)];
const REFUSED = ['nul\u0000', '\uD800lone', 'x'.repeat(256), ''];
const VALUES = [1, 2, 0.1, 0.2, -1, 0, 2.5, 9_007_199_254_740_990, -9_007_199_254_740_991, 0.30000000000000004, 1e308, Number.NaN];
const ZONES = ['Europe/Paris', 'europe/paris', 'America/Santiago', 'Pacific/Kiritimati', 'Not/AZone'];

type Op =
  | { kind: 'event'; user: string; metric: string; value: number; attrs: Record<string, string>; key?: string; tz?: string; plan?: string }
  | { kind: 'identify' | 'update'; user: string; plan?: string; name?: string; tz?: string }
  | { kind: 'complete'; user: string }
  | { kind: 'accrue'; user: string }
  | { kind: 'read'; what: number; user: string }
  | { kind: 'clock'; ms: number }
  | { kind: 'sweep' }
  | { kind: 'operate'; what: number; user: string; amount: number }
  | { kind: 'batch'; events: Extract<Op, { kind: 'event' }>[] };

/** Mostly valid choices, sometimes hostile ones: every store must accept and refuse exactly the same. */
const mostly = <T,>(valid: readonly T[], hostile: readonly T[]) =>
  fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...valid) }, { weight: 1, arbitrary: fc.constantFrom(...hostile) });
const user = mostly(USERS, REFUSED);
const tz = fc.option(mostly(ZONES.slice(0, 4), ZONES.slice(4)), { nil: undefined, freq: 2 });
const eventOp: fc.Arbitrary<Extract<Op, { kind: 'event' }>> = fc
      .record({
        user,
        metric: mostly(['toString', 'quiz'], ['valueOf']),
        value: mostly(VALUES.slice(0, 7), VALUES.slice(7)),
        attrs: mostly<Record<string, string>>([{}, { device: 'ios' }, { device: 'web' }], [{ nope: 'x' }, { device: 'a\u0000' }]),
        key: fc.option(mostly(['k1', 'k2', 'k3'], ['k\uDC00', 'k\u0000']), { nil: undefined, freq: 2 }),
        tz,
        plan: fc.option(mostly(['pro', 'free'], ['用'.repeat(1000)]), { nil: undefined, freq: 2 }),
      })
      .map((e) => ({ kind: 'event' as const, user: e.user, metric: e.metric, value: e.value, attrs: e.attrs, ...(e.key ? { key: e.key } : {}), ...(e.tz ? { tz: e.tz } : {}), ...(e.plan ? { plan: e.plan } : {}) }));
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 10, arbitrary: eventOp },
  { weight: 2, arbitrary: fc.array(eventOp, { minLength: 1, maxLength: 6 }).map((events): Op => ({ kind: 'batch', events })) },
  {
    weight: 2,
    arbitrary: fc
      .record({ kind: fc.constantFrom('identify' as const, 'update' as const), user, plan: fc.option(fc.constantFrom('pro', 'free'), { nil: undefined }), name: fc.option(mostly(['Ann', '😀'], ['n\u0000']), { nil: undefined }), tz })
      .map((e): Op => ({ kind: e.kind, user: e.user, ...(e.plan ? { plan: e.plan } : {}), ...(e.name ? { name: e.name } : {}), ...(e.tz ? { tz: e.tz } : {}) })),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('complete' as const), user }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('accrue' as const), user }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'sweep' as const }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('read' as const), what: fc.nat(17), user }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('operate' as const), what: fc.nat(10), user, amount: mostly([1, 2, -1, -5, 40], [0, 1.5]) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('clock' as const), ms: fc.constantFrom(0, 0, 1, 60_000, 3_600_000, 20 * 3_600_000, 86_400_000, 3 * 86_400_000) }) },
);

type Engine = ReturnType<typeof createEngine<typeof config>>;

/** Tenants a call goes to: the default one (undefined) most often, two others, and ids every store refuses. */
const TENANTS = [undefined, 'acme', 'Acme'] as const;
const tenantOf = mostly<string | undefined>(TENANTS, ['', 't'.repeat(256), 'a\u0000']);
const tenantOp: fc.Arbitrary<Op & { tenant?: string }> = fc.tuple(op, fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: tenantOf })).map(([o, t]) => (t === undefined ? o : { ...o, tenant: t }));

async function perform(engine: Engine, o: Op): Promise<unknown> {
  switch (o.kind) {
    case 'event': {
      const u = { id: o.user, ...(o.tz ? { tz: o.tz } : {}), ...(o.plan ? { attributes: { valueOf: o.plan } } : {}) };
      return engine.recordEvent(o.metric as 'quiz', { user: u, value: o.value, attributes: o.attrs }, o.key ? { idempotencyKey: o.key } : {});
    }
    case 'batch':
      return (
        await engine.recordEvents(
          o.events.map((e) => ({ metricKey: e.metric as 'quiz', user: { id: e.user, ...(e.tz ? { tz: e.tz } : {}), ...(e.plan ? { attributes: { valueOf: e.plan } } : {}) }, value: e.value, attributes: e.attrs, ...(e.key ? { idempotencyKey: e.key } : {}) })),
        )
      ).map((r) => (r.ok ? { ok: r.response } : { error: r.error.code }));
    case 'identify':
      return engine.identifyUser({ id: o.user, ...(o.name ? { name: o.name } : {}), ...(o.tz ? { tz: o.tz } : {}), ...(o.plan ? { attributes: { valueOf: o.plan } } : {}) });
    case 'update':
      return engine.updateUser(o.user, { ...(o.plan ? { attributes: { valueOf: o.plan } } : {}), ...(o.name ? { name: o.name } : {}) });
    case 'complete':
      return engine.completeAchievement('valueOf', { user: { id: o.user } });
    case 'accrue':
      return engine.accrue(o.user);
    case 'clock':
      return null;
    case 'sweep':
      return engine.sweep();
    case 'operate':
      switch (o.what) {
        case 0:
          return engine.grantFreezes(o.user, Math.abs(o.amount), { idempotencyKey: `f${o.amount}` });
        case 1:
          return engine.restoreStreak(o.user);
        case 2:
          return engine.pauseStreak(o.user, { start: '2026-01-06', end: '2026-01-07' });
        case 3: {
          const [pause] = (await engine.getStreak(o.user)).pauses;
          return engine.deletePause(o.user, pause?.id ?? 'none');
        }
        case 4:
          return engine.updatePreferences(o.user, { streak: { enabled: o.amount > 0 }, notifications: { recap: o.amount > 1 ? ['email'] : [] } });
        case 5:
          return engine.adjustPoints(o.user, 'energy', o.amount, { reason: 'shop', idempotencyKey: `a${o.amount}` });
        case 6:
          return engine.runOperations(o.user, [{ op: 'adjustPoints', system: 'toString', amount: -o.amount * 10 }, { op: 'grantFreezes', count: 1, requireRoom: true }]);
        case 7:
          return engine.createBoost({ pointsSystemKey: 'toString', userId: o.user, name: 'Double', start: '2026-01-05', end: '2026-01-09', multiplier: 2, rounding: 'down' });
        case 8: {
          const runtime = (await engine.getUserBoosts(o.user, 'toString')).filter((b) => b.userId === o.user);
          return engine.deleteBoost(runtime[0]?.id ?? 'none');
        }
        case 9:
          return engine.resetUser(o.user);
        default:
          return engine.deleteUser(o.user);
      }
    case 'read':
      switch (o.what) {
        case 0:
          return engine.getUserMetrics(o.user);
        case 1:
          return engine.getPointsSummary(o.user, 'toString', { awards: 5 });
        case 2:
          return engine.getLeaderboard('valueOf', { limit: 10 });
        case 3:
          return engine.getLeaderboard('by-plan', { userId: o.user, offset: -1, limit: 3 });
        case 4:
          return engine.getUserLeaderboard(o.user, 'valueOf', { numEvents: 5 });
        case 5:
          return engine.getStreak(o.user, { historyPeriods: 5 });
        case 6:
          return engine.getUserAchievements(o.user, { includeIncomplete: true });
        case 7:
          return engine.listAchievements();
        case 8:
          return Promise.all([engine.getLevelSummary('toString'), engine.getPointsHistogram('energy'), engine.getPointsHistogram('toString', { userAttributes: { valueOf: 'pro' } })]);
        case 9:
          return engine.getPointsEventSummary(o.user, 'energy', { aggregation: 'daily', startDate: '2026-01-04', endDate: '2026-01-20' });
        case 10:
          return engine.getLeaderboard('streaks', { limit: 10 });
        case 11: {
          // Cursors are opaque and each store's own: the pages they lead to must be the same.
          const first = await engine.getUserEvents(o.user, { limit: 2 });
          const second = first.next ? await engine.getUserEvents(o.user, { before: first.next, limit: 2 }) : null;
          return [first.events, first.next !== null, second?.events ?? null, second ? second.next !== null : null];
        }
        case 12:
          return engine.getProfile(o.user);
        case 13:
          return engine.getWrapped(o.user, { year: 2026 });
        case 14:
          return Promise.all([engine.listBoosts('toString', { includeFinished: true }), engine.getUserBoosts(o.user, 'toString')]);
        case 15:
          return engine.getPreferences(o.user);
        case 16:
          return engine.listAchievements({ userAttributes: { valueOf: 'pro' } });
        default:
          return engine.simulateEvent('quiz', { user: { id: o.user }, value: 1 });
      }
  }
}

/** A call's outcome in comparable form: the result, or the error's code (every failure must be a LaurelError). */
async function outcome(engine: Engine, o: Op & { tenant?: string }): Promise<unknown> {
  try {
    return { ok: await perform(o.tenant === undefined ? engine : engine.tenant(o.tenant), o) };
  } catch (error) {
    if (!isLaurelError(error)) throw error;
    return { error: error.code };
  }
}

interface Backend {
  name: string;
  make: () => Promise<Store>;
}

const pool = PG_URL ? new pg.Pool({ connectionString: PG_URL, max: 4 }) : null;
const lite = PG_URL ? null : new PGlite();
const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
afterAll(async () => {
  for (const schema of schemas.values()) await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool?.end();
  await lite?.close();
  await redis?.quit();
});

/**
 * The PostgreSQL schema of each rank mode, made and migrated on first use and emptied before every later run
 * (every table but `migrations`, identities restarted: what a fresh migration leaves). A schema per run made
 * some 80 catalog objects each; with other suites migrating schemas of their own on the same server, that
 * DDL on a growing catalog took runs from half a second to many seconds each.
 */
const schemas = new Map<'sql' | 'none', string>();

/** One statement on this suite's PostgreSQL (the server's pool, or PGlite). */
const sql = (text: string, params?: unknown[]) => (pool ? pool.query(text, params) : (lite as PGlite).query(text, params)) as Promise<{ rows: Record<string, unknown>[] }>;

async function postgres(ranks: 'sql' | 'none') {
  const client = (pool ?? lite) as never;
  let schema = schemas.get(ranks);
  if (schema === undefined) {
    schemas.set(ranks, (schema = uniq('diff')));
    await createPostgresStore({ client, schema, ranks }).migrate();
  } else {
    const tables = await sql(`SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename <> 'migrations'`, [schema]);
    await sql(`TRUNCATE ${tables.rows.map((t) => `"${schema}"."${String(t.tablename)}"`).join(', ')} RESTART IDENTITY`);
  }
  return createPostgresStore({ client, schema, ranks });
}

const backends: Backend[] = [
  { name: 'memory', make: async () => createMemoryStore() },
  // A store hook keeps recordEvent off the memory store's direct path: the locked path must agree with it.
  { name: 'memory (locked path)', make: async () => createMemoryStore({ beforeCommit: () => undefined }) },
  { name: PG_URL ? 'postgres (server)' : 'postgres (PGlite)', make: () => postgres('sql') },
];
if (redis) backends.push({ name: 'postgres + redis ranks', make: async () => withRankIndex(await postgres('none'), createRedisRankIndex({ redis, prefix: `${uniq('diff')}:` })) });

describe(`differential: ${backends.map((b) => b.name).join(' = ')}`, () => {
  it('the same random calls give identical responses, errors and final states on every store', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(tenantOp, { minLength: 10, maxLength: 60, size: 'max' }), async (ops) => {
        const runs = await Promise.all(
          backends.map(async (b) => {
            let now = Date.parse('2026-01-05T03:30:00Z');
            const store = await b.make();
            const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds('d') });
            return { b, store, engine, tick: (ms: number) => (now += ms) };
          }),
        );
        for (const [i, o] of ops.entries()) {
          const results = [];
          for (const r of runs) {
            if (o.kind === 'clock') r.tick(o.ms);
            results.push(await outcome(r.engine, o));
          }
          for (let k = 1; k < runs.length; k++) expect(results[k], `op ${i} ${JSON.stringify(o)} on ${runs[k]?.b.name}`).toEqual(results[0]);
        }
        for (const tenant of TENANTS) {
          const of = (r: (typeof runs)[number]) => ({ store: tenant === undefined ? r.store : (r.store.tenant?.(tenant) as Store), engine: tenant === undefined ? r.engine : r.engine.tenant(tenant) });
          const label = (k: number) => `${runs[k]?.b.name}, tenant ${tenant ?? '(default)'}`;
          const finals = await Promise.all(runs.map((r) => of(r).store.loadUsers(USERS)));
          for (let k = 1; k < runs.length; k++) expect(finals[k], `final states on ${label(k)}`).toEqual(finals[0]);
          const ledgers = await Promise.all(runs.map((r) => Promise.all(USERS.map((u) => of(r).store.readLedger({ userId: u, kind: 'points', key: 'toString', order: 'asc' })))));
          for (let k = 1; k < runs.length; k++) expect(ledgers[k], `ledgers on ${label(k)}`).toEqual(ledgers[0]);
          // The same change events, in the same order, with the same ids and payloads (positions are the store's own).
          // PostgreSQL's readChanges may hold recent events back while other transactions on the server are in
          // flight (an event is never skipped, it can come later): read until every store has as many as memory.
          const expected = (await allChanges(of(runs[0]!).engine)).length;
          const changes = await Promise.all(
            runs.map(async (r) => {
              let list = await allChanges(of(r).engine);
              for (let i = 0; i < 100 && list.length < expected; i++) {
                await new Promise((resolve) => setTimeout(resolve, 50));
                list = await allChanges(of(r).engine);
              }
              return list.map(({ position: _p, ...e }) => e);
            }),
          );
          for (let k = 1; k < runs.length; k++) expect(changes[k], `change events on ${label(k)}`).toEqual(changes[0]);
        }
      }),
      { numRuns: Number(process.env.DIFF_RUNS ?? (PG_URL ? 30 : 12)) },
    );
  }, 300_000);
});
