/**
 * Configuration evolution (docs/rules.md, "When the configuration changes" and "Replay"): stable ids, what a
 * changed configuration does to existing users, and replay under each policy.
 */
import { describe, expect, it } from 'vitest';
import { applyEvent, createEngine, defineConfig, type ConfigInput, type LedgerRow, type UserState } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { stableId } from '../src/core/ids.js';
import { sequentialIds } from '../src/testing/index.js';

const DAY = 86_400_000;
const T0 = Date.parse('2026-03-02T09:00:00Z');

function clockAt(ms: number) {
  const clock = { now: ms, fn: () => new Date(clock.now) };
  return clock;
}

const daily = { key: 'daily', type: 'time' as const, timeUnit: 'day' as const, timeInterval: 1, points: 10 };
const perLesson = { key: 'per-lesson', type: 'metric' as const, metricKey: 'lessons', metricThreshold: 1, points: 1 };
const coinsSystem = { key: 'coins', name: 'Coins', triggers: [daily, perLesson] };
const lessonsMetric = { key: 'lessons', name: 'Lessons' };

const base = {
  timeZone: 'UTC',
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'quizzes', name: 'Quizzes' },
  ],
  attributes: [{ key: 'plan', name: 'Plan', type: 'user' as const }],
  pointsSystems: [coinsSystem],
} satisfies ConfigInput;

async function ledgerOf(store: ReturnType<typeof createMemoryStore>, userId: string): Promise<LedgerRow[]> {
  return (await store.readUserLedger(userId, { limit: 10_000 })).rows;
}

describe('stable identity', () => {
  it('inserting a trigger in front of a time trigger does not pay its past grants again', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const a = createEngine({ config: defineConfig(base), store, clock: clock.fn, newId: sequentialIds() });
    await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    clock.now = T0 + 30 * DAY;
    expect((await a.getPointsSummary('u1', 'coins')).total).toBe(301);
    const inserted = defineConfig({
      ...base,
      pointsSystems: [{ ...coinsSystem, triggers: [{ key: 'per-quiz', type: 'metric' as const, metricKey: 'quizzes', metricThreshold: 1, points: 2 }, ...coinsSystem.triggers] }],
    });
    const b = createEngine({ config: inserted, store, clock: clock.fn, newId: sequentialIds('b') });
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(301);
    const res = await b.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(res.points.coins?.total).toBe(302);
  });

  it('edited in every way, a configuration never pays an award twice and never loses progress', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const five = { key: 'five', name: 'Five', trigger: 'metric' as const, metricKey: 'lessons', metricValue: 5 };
    const ten = { key: 'ten', name: 'Ten', trigger: 'metric' as const, metricKey: 'lessons', metricValue: 10 };
    const every3 = { key: 'every-3', type: 'metric' as const, metricKey: 'lessons', metricThreshold: 3, points: 5 };
    const fiveBonus = { key: 'five-bonus', type: 'achievement' as const, achievementKey: 'five', points: 100 };
    const v1 = { ...base, achievements: [five, ten], pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [daily, every3, fiveBonus] }] } satisfies ConfigInput;
    const versions: ConfigInput[] = [
      v1,
      // insert a trigger and an achievement in front, reorder the rest
      {
        ...v1,
        achievements: [{ key: 'quiz-1', name: 'Quiz', trigger: 'metric', metricKey: 'quizzes', metricValue: 100 }, ten, five],
        pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ key: 'per-quiz', type: 'metric', metricKey: 'quizzes', metricThreshold: 1, points: 1 }, fiveBonus, every3, daily] }],
      },
      // remove a trigger, change points and thresholds of the others
      {
        ...v1,
        achievements: [{ ...ten, metricValue: 12 }, five],
        pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ ...fiveBonus, points: 150 }, { ...daily, points: 20 }] }],
      },
      v1,
    ];
    let expectedDaily = 0;
    let lessons = 0;
    for (const [i, input] of versions.entries()) {
      const engine = createEngine({ config: defineConfig(input), store, clock: clock.fn, newId: sequentialIds(`v${i}-`) });
      for (let k = 0; k < 4; k++) {
        await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
        lessons++;
        clock.now += DAY;
      }
      const rows = await ledgerOf(store, 'u1');
      const awards = rows.filter((r) => r.kind === 'points');
      // every award row is distinct (trigger, instant) except time-grant runs, which never overlap
      const seen = new Set<string>();
      for (const r of awards) {
        const d = r.data as { trigger: string; grants?: { count: number } };
        const key = `${d.trigger}@${r.at}`;
        expect(seen.has(key), `award ${key} paid twice after version ${i}`).toBe(false);
        seen.add(key);
      }
      const daily = stableId('pointsTrigger', 'coins/daily');
      const grants = awards.filter((r) => (r.data as { trigger: string }).trigger === daily).reduce((n, r) => n + ((r.data as { grants?: { count: number } }).grants?.count ?? 1), 0);
      expectedDaily = Math.floor((clock.now - T0) / DAY) - 1;
      expect(grants, `daily grants after version ${i}`).toBe(expectedDaily);
      const user = (await engine.getUserMetric('u1', 'lessons')).current;
      expect(user).toBe(lessons);
      const held = (await engine.getUserAchievements('u1')).map((a) => a.key);
      if (lessons >= 5) expect(held).toContain('five');
      const fiveBonus = awards.filter((r) => (r.data as { trigger: string }).trigger === stableId('pointsTrigger', 'coins/five-bonus'));
      expect(fiveBonus.length, 'the achievement bonus is paid once').toBe(lessons >= 5 ? 1 : 0);
    }
  });
});

describe('a changed configuration, on the next read or write', () => {
  const withAchievement = (metricValue: number, points = 50) =>
    defineConfig({
      ...base,
      achievements: [{ key: 'three', name: 'Three lessons', trigger: 'metric', metricKey: 'lessons', metricValue }],
      pointsSystems: [{ ...coinsSystem, triggers: [...coinsSystem.triggers, { key: 'three-bonus', type: 'achievement' as const, achievementKey: 'three', points }] }],
    });

  it('backdates an added achievement the user already meets, silently, and pays its points dated then', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const a = createEngine({ config: defineConfig(base), store, clock: clock.fn, newId: sequentialIds() });
    for (let i = 0; i < 4; i++) {
      await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
      clock.now += 3_600_000;
    }
    const third = new Date(T0 + 2 * 3_600_000).toISOString();
    clock.now = T0 + 2 * DAY;
    const b = createEngine({ config: withAchievement(3), store, clock: clock.fn, newId: sequentialIds('b') });
    // a read shows it, dated when the third lesson was recorded
    const read = await b.getUserAchievements('u1');
    expect(read.map((x) => [x.key, x.achievedAt])).toEqual([['three', third]]);
    // the next event does not announce it
    const res = await b.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(res.achievements).toEqual([]);
    const bonus = res.points.coins?.awards.find((w) => w.trigger.id === stableId('pointsTrigger', 'coins/three-bonus'));
    expect(bonus).toBeUndefined();
    const summary = await b.getPointsSummary('u1', 'coins', { awards: 20 });
    const paid = summary.awards.filter((w) => w.trigger.id === stableId('pointsTrigger', 'coins/three-bonus'));
    expect(paid).toHaveLength(1);
    expect(paid[0]?.date).toBe(third);
    expect(paid[0]?.awarded).toBe(50);
    // booked when found: the ledger row is dated now and says when the award counts from
    const row = (await ledgerOf(store, 'u1')).find((r) => r.kind === 'points' && (r.data as { trigger?: string }).trigger === stableId('pointsTrigger', 'coins/three-bonus'));
    expect(row?.at).toBe(new Date(T0 + 2 * DAY).toISOString());
    expect((row?.data as { dated?: string }).dated).toBe(third);
    expect((await b.listAchievements()).find((x) => x.key === 'three')?.completions).toBe(1);
    // and only once
    await b.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(summary.total + 1);
  });

  it('backdates composite and streak achievements', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const streaky = { ...base, streak: { frequency: 'daily' as const } };
    const a = createEngine({ config: defineConfig(streaky), store, clock: clock.fn, newId: sequentialIds() });
    for (let d = 0; d < 3; d++) {
      await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
      clock.now += DAY;
    }
    const b = createEngine({
      config: defineConfig({
        ...streaky,
        achievements: [
          { key: 'streak-2', name: 'Two days', trigger: 'streak', streakLength: 2 },
          { key: 'two', name: 'Two lessons', trigger: 'metric', metricKey: 'lessons', metricValue: 2 },
          { key: 'both', name: 'Both', trigger: 'achievement', achievementKeys: ['streak-2', 'two'] },
        ],
      }),
      store,
      clock: clock.fn,
      newId: sequentialIds('b'),
    });
    const got = Object.fromEntries((await b.getUserAchievements('u1')).map((x) => [x.key, x.achievedAt]));
    const second = new Date(T0 + DAY).toISOString();
    expect(got).toEqual({ 'streak-2': second, two: second, both: second });
  });

  it('recomputes the streak from the ledger when its frequency changes', async () => {
    const store = createMemoryStore();
    const start = Date.parse('2026-03-02T09:00:00Z'); // a Monday
    const clock = clockAt(start);
    const daily = { ...base, streak: { frequency: 'daily' as const } };
    const a = createEngine({ config: defineConfig(daily), store, clock: clock.fn, newId: sequentialIds() });
    for (let d = 0; d < 3; d++) {
      await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
      clock.now += DAY;
    }
    clock.now = start + 7 * DAY; // next Monday
    await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await a.getStreak('u1')).length).toBe(1);
    const b = createEngine({ config: defineConfig({ ...daily, streak: { frequency: 'weekly' } }), store, clock: clock.fn, newId: sequentialIds('b') });
    const s = await b.getStreak('u1', { historyPeriods: 2 });
    expect(s.length).toBe(2);
    expect(s.frequency).toBe('weekly');
    expect(s.streakHistory.map((p) => [p.periodStart, p.length])).toEqual([
      ['2026-03-02', 1],
      ['2026-03-09', 2],
    ]);
  });

  it('clamps a total above a lowered maxPoints, with a ledger row saying so', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const a = createEngine({ config: defineConfig(base), store, clock: clock.fn, newId: sequentialIds() });
    await a.recordEvent('lessons', { user: { id: 'u1' }, value: 30 });
    expect((await a.getPointsSummary('u1', 'coins')).total).toBe(30);
    const capped = defineConfig({ ...base, pointsSystems: [{ ...coinsSystem, maxPoints: 20 }] });
    const b = createEngine({ config: capped, store, clock: clock.fn, newId: sequentialIds('b') });
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(20);
    await b.accrue('u1');
    const rows = await ledgerOf(store, 'u1');
    const clamp = rows.find((r) => (r.data as { adjustment?: string } | null)?.adjustment === 'maxPoints');
    expect(clamp).toMatchObject({ kind: 'points', key: 'coins', delta: -10, total: 20 });
    // the clamp is not an award
    expect((await b.getPointsSummary('u1', 'coins')).awards.every((w) => w.awarded > 0)).toBe(true);
  });

  it('starts a newly configured time trigger now instead of paying since the user was created', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const none = { ...base, pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [perLesson] }] };
    const a = createEngine({ config: defineConfig(none), store, clock: clock.fn, newId: sequentialIds() });
    await a.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    clock.now = T0 + 100 * DAY;
    const b = createEngine({ config: defineConfig(base), store, clock: clock.fn, newId: sequentialIds('b') });
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(1);
    await b.accrue('u1');
    clock.now += 3 * DAY;
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(31);
  });

  it('keeps the data of removed metrics, achievements, systems and boards hidden, and restores it when re-added', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const full = {
      ...base,
      achievements: [{ key: 'one-quiz', name: 'Quiz', trigger: 'metric' as const, metricKey: 'quizzes', metricValue: 1 }],
      pointsSystems: [...base.pointsSystems, { key: 'xp', name: 'XP', triggers: [{ key: 'q', type: 'metric' as const, metricKey: 'quizzes', metricThreshold: 1, points: 7 }] }],
      leaderboards: [{ key: 'quizzers', name: 'Quizzers', rankBy: 'metric' as const, metricKey: 'quizzes', start: '2026-01-01' }],
    } satisfies ConfigInput;
    const a = createEngine({ config: defineConfig(full), store, clock: clock.fn, newId: sequentialIds() });
    await a.recordEvent('quizzes', { user: { id: 'u1' }, value: 3 });
    const slim = createEngine({ config: defineConfig(base), store, clock: clock.fn, newId: sequentialIds('s') });
    await slim.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await slim.getUserMetrics('u1')).map((m) => m.name)).toEqual(['Lessons', 'Quizzes']);
    const slimmer = createEngine({ config: defineConfig({ ...base, metrics: [lessonsMetric], pointsSystems: [{ ...coinsSystem }] }), store, clock: clock.fn, newId: sequentialIds('t') });
    await slimmer.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await slimmer.getUserMetrics('u1')).map((m) => m.name)).toEqual(['Lessons']);
    const back = createEngine({ config: defineConfig(full), store, clock: clock.fn, newId: sequentialIds('r') });
    expect((await back.getUserMetric('u1', 'quizzes')).current).toBe(3);
    expect((await back.getUserAchievements('u1')).map((x) => x.key)).toEqual(['one-quiz']);
    expect((await back.getPointsSummary('u1', 'xp')).total).toBe(21);
    expect((await back.getUserLeaderboard('u1', 'quizzers')).value).toBe(3);
  });

  it('moves the progress of a state written before 0.3 from positional trigger ids to key-derived ones', () => {
    const cfg = defineConfig(base);
    const legacyId = stableId('pointsTrigger', 'coins:1:metric');
    const legacyTime = stableId('pointsTrigger', 'coins:0:time');
    const legacy = {
      user: { id: 'u1', email: null, name: null, tz: null, attributes: {}, created: new Date(T0).toISOString(), updated: new Date(T0).toISOString() },
      metrics: { lessons: 2 },
      achievementProgress: {},
      achievements: {},
      streak: null,
      points: { coins: { total: 32, metric: { [legacyId]: { sum: 2, hw: 2 } }, time: { [legacyTime]: 3 } } },
      leaderboards: {},
    } as unknown as UserState;
    const out = applyEvent(cfg, legacy, { metricKey: 'lessons', user: { id: 'u1' }, value: 1 }, { now: new Date(T0 + 3 * DAY + 1000), newId: sequentialIds() });
    expect(out.response.points.coins?.total).toBe(33);
    const ps = out.state.points.coins;
    expect(ps?.metric[stableId('pointsTrigger', 'coins/per-lesson')]).toEqual({ sum: 3, hw: 3 });
    expect(ps?.time[stableId('pointsTrigger', 'coins/daily')]).toBe(3);
    expect(out.state.rules).toBe(cfg.rules.all);
  });
});

describe('replay', () => {
  const doubled = (points: number) => defineConfig({ ...base, pointsSystems: [{ ...coinsSystem, triggers: [daily, { ...perLesson, points }] }] });

  async function seeded() {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const a = createEngine({ config: defineConfig(base), store, clock: clock.fn, newId: sequentialIds() });
    for (const u of ['u1', 'u2']) for (let i = 0; i < 3; i++) await a.recordEvent('lessons', { user: { id: u }, value: 1 });
    clock.now = T0 + 12 * 3_600_000;
    return { store, clock };
  }

  it("'forward' keeps past awards; 'retroactive' re-prices them with reversal rows; dry runs commit nothing and report the same diff", async () => {
    const { store, clock } = await seeded();
    const b = createEngine({ config: doubled(2), store, clock: clock.fn, newId: sequentialIds('b') });
    const forward = await b.replay({ policy: 'forward' });
    expect(forward.changed).toBe(0);
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(3);

    const dry = await b.replay({ policy: 'retroactive', dryRun: true, users: ['u1', 'u2', 'nobody'] });
    expect(dry.users).toBe(2);
    expect(dry.diffs.map((d) => d.points.coins)).toEqual([
      { before: 3, after: 6, delta: 3 },
      { before: 3, after: 6, delta: 3 },
    ]);
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(3);
    const real = await b.replay({ policy: 'retroactive', users: ['u1', 'u2'] });
    expect(real.diffs).toEqual(dry.diffs);
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(6);
    const rows = (await ledgerOf(store, 'u1')).filter((r) => r.kind === 'points');
    expect(rows.filter((r) => (r.data as { reverses?: string }).reverses !== undefined)).toHaveLength(3);
    expect(rows.filter((r) => (r.data as { dated?: string }).dated !== undefined)).toHaveLength(3);
    // nothing is deleted: the original awards are still there
    expect(rows.filter((r) => r.delta === 1)).toHaveLength(3);
    // a second run finds nothing to do
    expect((await b.replay({ policy: 'retroactive' })).changed).toBe(0);
  });

  it("'grandfather' keeps what was paid and unlocked; 'retroactive' takes it back", async () => {
    const { store, clock } = await seeded();
    const withTwo = (metricValue: number) => ({ ...base, achievements: [{ key: 'two', name: 'Two', trigger: 'metric' as const, metricKey: 'lessons', metricValue }] });
    await createEngine({ config: defineConfig(withTwo(2)), store, clock: clock.fn, newId: sequentialIds('w') }).replay({ policy: 'forward' });
    const harder = { ...withTwo(5), pointsSystems: [{ ...coinsSystem, triggers: [daily, { ...perLesson, metricThreshold: 2 }] }] };
    const b = createEngine({ config: defineConfig(harder), store, clock: clock.fn, newId: sequentialIds('g') });
    const g = await b.replay({ policy: 'grandfather', users: ['u1'] });
    expect(g.diffs).toEqual([]);
    expect((await b.getUserAchievements('u1')).map((x) => x.key)).toEqual(['two']);
    expect((await b.getPointsSummary('u1', 'coins')).total).toBe(3);
    const r = await b.replay({ policy: 'retroactive', users: ['u1'] });
    expect(r.diffs[0]?.achievements).toEqual({ gained: [], lost: ['two'], redated: [] });
    expect(r.diffs[0]?.points.coins).toEqual({ before: 3, after: 1, delta: -2 });
    expect(await b.getUserAchievements('u1')).toEqual([]);
    expect((await b.listAchievements())[0]?.completions).toBe(1);
  });

  it('reports board values and ranks before and after in the diff', async () => {
    const store = createMemoryStore();
    const clock = clockAt(T0);
    const boarded = { ...base, leaderboards: [{ key: 'coins', name: 'Coins', rankBy: 'points' as const, pointsSystemKey: 'coins', start: '2026-01-01' }] };
    const a = createEngine({ config: defineConfig(boarded), store, clock: clock.fn, newId: sequentialIds() });
    await a.recordEvent('lessons', { user: { id: 'u1' }, value: 3 });
    await a.recordEvent('lessons', { user: { id: 'u2' }, value: 1 });
    await a.recordEvent('quizzes', { user: { id: 'u2' }, value: 1 });
    const quizPays = { ...boarded, pointsSystems: [{ ...coinsSystem, triggers: [daily, perLesson, { key: 'per-quiz', type: 'metric' as const, metricKey: 'quizzes', metricThreshold: 1, points: 5 }] }] };
    const b = createEngine({ config: defineConfig(quizPays), store, clock: clock.fn, newId: sequentialIds('b') });
    const dry = await b.replay({ policy: 'retroactive', dryRun: true, users: ['u2'] });
    expect(dry.diffs[0]?.leaderboards.coins).toEqual({ before: 1, after: 6, rankBefore: 2, rankAfter: 1 });
    const real = await b.replay({ policy: 'retroactive', users: ['u2'] });
    expect(real.diffs).toEqual(dry.diffs);
    expect((await b.getUserLeaderboard('u2', 'coins')).rank).toBe(1);
  });

  it('walks every user by cursor, reports progress and resumes after a given user', async () => {
    const { store, clock } = await seeded();
    const b = createEngine({ config: doubled(2), store, clock: clock.fn, newId: sequentialIds('b') });
    const seen: string[] = [];
    const first = await b.replay({ policy: 'retroactive', pageSize: 1, onProgress: (p) => seen.push(p.cursor) });
    expect(seen).toEqual(['u1', 'u2']);
    expect(first.cursor).toBe('u2');
    const resumed = await b.replay({ policy: 'retroactive', dryRun: true, after: 'u1' });
    expect(resumed.users).toBe(1);
    await expect(b.replay({ policy: 'sideways' as never })).rejects.toMatchObject({ code: 'VALIDATION' });
  });
});
