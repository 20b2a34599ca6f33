/**
 * Replay's properties, for random histories and random configuration changes, on the memory store and on
 * PostgreSQL (the real server when LAUREL_PG_URL is set, else PGlite):
 * - `retroactive` replay from the ledger equals recording the same inputs from scratch under the new
 *   configuration: metric totals, achievements (and when each was met), the streak, points totals and
 *   progress, the awards in force (each grant of a run counted alone), and board values;
 * - `forward` replay never changes a past award (every row stays, nothing is reversed);
 * - `grandfather` replay never removes an achievement;
 * - a dry run reports the diffs of the real run (ranks aside, which a real run moves user by user).
 */
import { PGlite } from '@electric-sql/pglite';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelError, viewState, type AwardRow, type ConfigInput, type LaurelConfig, type LedgerRow, type Store, type UserState } from '../src/index.js';
import { grantInstant } from '../src/core/points.js';
import { createMemoryStore } from '../src/memory.js';
import { createPostgresStore } from '../src/postgres.js';
import { sequentialIds } from '../src/testing/index.js';
import { PG_URL, uniq } from './servers.js';

const T0 = Date.parse('2026-03-02T10:00:00Z');
const USERS = ['u0', 'u1', 'u2'];

/** A configuration from a few knobs: every draw is a valid configuration, two draws are a change. */
const knobs = fc.record({
  three: fc.integer({ min: 1, max: 6 }),
  filtered: fc.boolean(),
  composite: fc.boolean(),
  streakLength: fc.integer({ min: 1, max: 3 }),
  frequency: fc.constantFrom('daily' as const, 'weekly' as const),
  freezes: fc.boolean(),
  perLesson: fc.integer({ min: 1, max: 5 }),
  lessonThreshold: fc.integer({ min: 1, max: 3 }),
  bonus: fc.integer({ min: 1, max: 40 }),
  hourly: fc.option(fc.integer({ min: 5, max: 30 }), { nil: null }),
  maxPoints: fc.option(fc.integer({ min: 20, max: 200 }), { nil: null }),
  quizCost: fc.option(fc.integer({ min: 1, max: 30 }), { nil: null }),
  signup: fc.integer({ min: 1, max: 20 }),
});
type Knobs = typeof knobs extends fc.Arbitrary<infer K> ? K : never;

function configOf(k: Knobs): LaurelConfig {
  const achievements: NonNullable<ConfigInput['achievements']>[number][] = [
    { key: 'three', name: 'Lessons', trigger: 'metric', metricKey: 'lessons', metricValue: k.three, ...(k.filtered ? { eventAttributes: { device: 'ios' } } : {}) },
    { key: 'streaky', name: 'Streaky', trigger: 'streak', streakLength: k.streakLength },
    { key: 'welcome', name: 'Welcome', trigger: 'api', ...(k.filtered ? { userAttributes: { plan: 'pro' } } : {}) },
  ];
  if (k.composite) achievements.push({ key: 'both', name: 'Both', trigger: 'achievement', achievementKeys: ['three', 'streaky'] });
  const coins: NonNullable<NonNullable<ConfigInput['pointsSystems']>[number]['triggers']>[number][] = [{ key: 'signup', type: 'user_creation', points: k.signup }];
  if (k.hourly !== null) coins.push({ key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 6, points: k.hourly });
  if (k.quizCost !== null) coins.push({ key: 'quiz-cost', type: 'metric', metricKey: 'quizzes', metricThreshold: 1, points: -k.quizCost, blockIfOutOfPoints: true });
  return defineConfig({
    timeZone: 'Europe/Paris',
    metrics: [
      { key: 'lessons', name: 'Lessons' },
      { key: 'quizzes', name: 'Quizzes' },
    ],
    attributes: [
      { key: 'device', name: 'Device', type: 'event' },
      { key: 'plan', name: 'Plan', type: 'user' },
    ],
    achievements,
    streak: { frequency: k.frequency, ...(k.freezes ? { freezes: { initial: 1, max: 2 } } : {}) },
    pointsSystems: [
      {
        key: 'xp',
        name: 'XP',
        triggers: [
          { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: k.lessonThreshold, points: k.perLesson },
          { key: 'three-bonus', type: 'achievement', achievementKey: 'three', points: k.bonus },
          { key: 'streak-bonus', type: 'streak', streakLengthThreshold: 2, points: 3 },
        ],
      },
      { key: 'coins', name: 'Coins', maxPoints: k.maxPoints, triggers: coins },
    ],
    leaderboards: [
      { key: 'lessons', name: 'Lessons', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' },
      { key: 'weekly-xp', name: 'Weekly XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-03-02', runUnit: 'day', runInterval: 7 },
      { key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2026-01-01' },
    ],
  });
}

type Op =
  | { kind: 'event'; user: string; metric: 'lessons' | 'quizzes'; value: number; device?: string; plan?: string; tz?: string; dt: number }
  | { kind: 'identify'; user: string; plan?: string; tz?: string; dt: number }
  | { kind: 'complete'; user: string; dt: number }
  | { kind: 'accrue'; user: string; dt: number };

const user = fc.constantFrom(...USERS);
const dt = fc.integer({ min: 0, max: 40 * 3600 });
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('event' as const), user, metric: fc.constantFrom('lessons' as const, 'quizzes' as const), value: fc.integer({ min: -1, max: 3 }), device: maybe(fc.constantFrom('ios', 'web')), plan: maybe(fc.constantFrom('pro', 'free')), tz: maybe(fc.constantFrom('Asia/Tokyo', 'America/New_York')), dt }, { requiredKeys: ['kind', 'user', 'metric', 'value', 'dt'] }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('identify' as const), user, plan: maybe(fc.constantFrom('pro', 'free')), tz: maybe(fc.constantFrom('Asia/Tokyo', 'Europe/Paris')), dt }, { requiredKeys: ['kind', 'user', 'dt'] }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('complete' as const), user, dt }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('accrue' as const), user, dt }) },
);

/**
 * Applies a history of inputs to an engine, each at its instant; refusals are part of the history (nothing
 * recorded). Returns the inputs that were accepted, with their instants: the history the ledger holds.
 */
async function record(engine: ReturnType<typeof createEngine>, ops: readonly Op[], clock: { now: number }, absolute = false): Promise<Op[]> {
  clock.now = T0;
  const accepted: Op[] = [];
  const completed = new Set<string>();
  for (const u of USERS) await engine.identifyUser({ id: u });
  for (const o of ops) {
    clock.now = absolute ? o.dt : clock.now + o.dt * 1000;
    try {
      if (o.kind === 'event') {
        const userInput = { id: o.user, ...(o.plan ? { attributes: { plan: o.plan } } : {}), ...(o.tz ? { tz: o.tz } : {}) };
        await engine.recordEvent(o.metric, { user: userInput, value: o.value, ...(o.device ? { attributes: { device: o.device } } : {}) });
      } else if (o.kind === 'identify') {
        await engine.identifyUser({ id: o.user, ...(o.plan ? { attributes: { plan: o.plan } } : {}), ...(o.tz ? { tz: o.tz } : {}) });
      } else if (o.kind === 'complete') {
        await engine.completeAchievement('welcome', { user: { id: o.user } });
        // Completing again changes nothing and writes nothing: not part of the history.
        if (completed.has(o.user)) continue;
        completed.add(o.user);
      } else {
        await engine.accrue(o.user);
      }
      accepted.push({ ...o, dt: clock.now });
    } catch (error) {
      if (!isLaurelError(error)) throw error;
    }
  }
  return accepted;
}

async function rowsOf(store: Store, userId: string): Promise<LedgerRow[]> {
  const rows: LedgerRow[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await store.readUserLedger(userId, after === undefined ? { limit: 500 } : { after, limit: 500 });
    rows.push(...page.rows);
    if (page.next === null) return rows;
    after = page.next;
  }
}

/** The awards in force, each grant of a run on its own: `trigger|date|amount` sorted. */
function awardsInForce(rows: readonly LedgerRow[], system: string): string[] {
  const taken = new Set<string>();
  for (const r of rows) if (r.kind === 'points' && r.key === system && (r.data as AwardRow | null)?.reverses) taken.add((r.data as AwardRow).reverses as string);
  const out: string[] = [];
  for (const r of rows) {
    if (r.kind !== 'points' || r.key !== system || taken.has(r.id)) continue;
    const d = r.data as (AwardRow & { adjustment?: string }) | null;
    if (!d || d.adjustment || d.reverses) continue;
    const date = d.dated ?? r.at;
    if (d.grants) {
      const each = r.delta / d.grants.count;
      for (let j = 0; j < d.grants.count; j++) out.push(`${d.trigger}|${new Date(grantInstant(date, d.grants, j)).toISOString()}|${each}`);
    } else out.push(`${d.trigger}|${date}|${r.delta}`);
  }
  return out.sort();
}

/** What must agree between a replayed user and the same user recorded from scratch. */
function derived(cfg: LaurelConfig, state: UserState, rows: readonly LedgerRow[]) {
  const points: Record<string, unknown> = {};
  // Progress on triggers the configuration no longer has is kept hidden by replay: compare configured ones.
  const only = <T>(r: Record<string, T>, ids: Set<string>) => Object.fromEntries(Object.entries(r).filter(([k]) => ids.has(k)));
  for (const [k, p] of Object.entries(state.points)) {
    const ids = new Set(cfg.index.pointsSystems.get(k)?.triggers.map((t) => t.id) ?? []);
    points[k] = { total: p.total, metric: only(p.metric, ids), time: only(p.time, ids), awards: awardsInForce(rows, k) };
  }
  // Data of removed achievements, metrics and boards stays hidden in the state: compare configured ones.
  const achievements = new Set(cfg.achievements.map((a) => a.key));
  return {
    metrics: only(state.metrics, new Set(cfg.metrics.map((m) => m.key))),
    achievements: Object.fromEntries(Object.entries(state.achievements).filter(([k]) => achievements.has(k)).map(([k, v]) => [k, v.achievedAt])),
    progress: only(state.achievementProgress, achievements),
    streak: state.streak ? { ...state.streak, sums: { ...state.streak.sums } } : null,
    points,
    boards: Object.fromEntries(Object.entries(state.leaderboards).filter(([k]) => cfg.index.leaderboards.has(k)).map(([k, b]) => [k, [b.run, b.group, b.value]])),
  };
}

const pgPool = PG_URL ? new pg.Pool({ connectionString: PG_URL, max: 4 }) : null;
let lite: PGlite | null = null;
afterAll(async () => {
  await pgPool?.end();
  await lite?.close();
});

async function postgresStore(): Promise<Store> {
  if (!pgPool) lite ??= new PGlite();
  const store = createPostgresStore({ client: (pgPool ?? lite) as never, schema: uniq('evo') });
  await store.migrate();
  return store;
}

const stores: [string, () => Promise<Store>, number][] = [
  ['memory', async () => createMemoryStore(), 60],
  [PG_URL ? 'PostgreSQL' : 'PGlite', postgresStore, 6],
];

describe.each(stores)('replay on the %s store', (_name, makeStore, numRuns) => {
  it("'retroactive' replay equals recording the same history from scratch under the new configuration", async () => {
    await fc.assert(
      fc.asyncProperty(knobs, knobs, fc.array(op, { minLength: 1, maxLength: 40 }), async (ka, kb, ops) => {
        const a = configOf(ka);
        const b = configOf(kb);
        const clock = { now: T0 };
        const store = await makeStore();
        const history = await record(createEngine({ config: a, store, clock: () => new Date(clock.now), newId: sequentialIds('a') }), ops, clock);
        const end = clock.now + 3600_000;
        clock.now = end;
        const replayer = createEngine({ config: b, store, clock: () => new Date(clock.now), newId: sequentialIds('r') });
        const dry = await replayer.replay({ policy: 'retroactive', dryRun: true, users: USERS });
        const real = await replayer.replay({ policy: 'retroactive', users: USERS });
        // Ranks are read against the board as it stands when each user is replayed: a real run has moved the
        // users before, a dry run has not. Everything else is equal, and the first user's diff is equal whole.
        const valuesOnly = (ds: typeof real.diffs) => ds.map((d) => ({ ...d, leaderboards: Object.fromEntries(Object.entries(d.leaderboards).map(([k, l]) => [k, { before: l.before, after: l.after }])) }));
        expect(valuesOnly(real.diffs)).toEqual(valuesOnly(dry.diffs));
        if (real.diffs[0] && dry.diffs[0]?.userId === real.diffs[0].userId) expect(real.diffs[0]).toEqual(dry.diffs[0]);

        const scratch = await makeStore();
        const fresh = createEngine({ config: b, store: scratch, clock: () => new Date(clock.now), newId: sequentialIds('s') });
        // The same history (the inputs the ledger holds, at their instants) recorded under the new configuration.
        await record(fresh, history, clock, true);
        clock.now = end;
        for (const u of USERS) {
          await fresh.accrue(u);
          // States as of `end` (an accrue that only skips grants at a cap commits nothing; a view counts them).
          const ctx = { now: new Date(end), newId: sequentialIds('v') };
          const replayed = viewState(b, (await store.loadUser(u))?.state as UserState, ctx).state;
          const expected = viewState(b, (await scratch.loadUser(u))?.state as UserState, ctx).state;
          expect(derived(b, replayed, await rowsOf(store, u)), `user ${u}`).toEqual(derived(b, expected, await rowsOf(scratch, u)));
        }
        // Replaying again changes nothing.
        const again = await replayer.replay({ policy: 'retroactive', users: USERS });
        expect(again.diffs).toEqual([]);
      }),
      { numRuns },
    );
  }, 600_000);

  it("'forward' never changes a past award and 'grandfather' never removes an achievement", async () => {
    await fc.assert(
      fc.asyncProperty(knobs, knobs, fc.array(op, { minLength: 1, maxLength: 30 }), fc.boolean(), async (ka, kb, ops, forward) => {
        const clock = { now: T0 };
        const store = await makeStore();
        await record(createEngine({ config: configOf(ka), store, clock: () => new Date(clock.now), newId: sequentialIds('a') }), ops, clock);
        clock.now += 3600_000;
        const before = new Map<string, { rows: LedgerRow[]; state: UserState }>();
        for (const u of USERS) before.set(u, { rows: await rowsOf(store, u), state: (await store.loadUser(u))?.state as UserState });
        const b = createEngine({ config: configOf(kb), store, clock: () => new Date(clock.now), newId: sequentialIds('b') });
        await b.replay({ policy: forward ? 'forward' : 'grandfather' });
        for (const u of USERS) {
          const was = before.get(u) as { rows: LedgerRow[]; state: UserState };
          const rows = await rowsOf(store, u);
          const state = (await store.loadUser(u))?.state as UserState;
          // Every earlier row is still there, unchanged, and in place.
          expect(rows.slice(0, was.rows.length)).toEqual(was.rows);
          const reversals = rows.slice(was.rows.length).filter((r) => (r.data as AwardRow | null)?.reverses !== undefined);
          expect(reversals).toEqual([]);
          for (const k of Object.keys(was.state.achievements)) expect(state.achievements[k], `${u} keeps ${k}`).toBeDefined();
          if (forward) {
            for (const [k, p] of Object.entries(was.state.points)) {
              const cap = configOf(kb).index.pointsSystems.get(k)?.maxPoints ?? null;
              // Only a lowered cap takes points away under `forward`, with an adjustment row.
              if (cap === null || p.total <= cap) expect((state.points[k]?.total ?? 0) >= p.total).toBe(true);
            }
          }
        }
      }),
      { numRuns },
    );
  }, 600_000);
});
