/**
 * Reads show what the next write commits (docs/rules.md, section 10: a changed configuration applies "on the
 * next read or write"; reads apply it to what they return without committing). Two reads did not:
 * `getUserMetric(s)` read the stored state as it was (an added achievement the user already met showed as
 * incomplete there, unlocked in `getUserAchievements`), and no read settled what a write settles (a composite
 * achievement added whose prerequisites the user holds showed only after some write). Found by a fuzz of
 * configuration changes; reads still draw no ids and commit nothing.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, type ConfigInput } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';

const T0 = Date.parse('2026-03-02T10:00:00Z');
const DAY = 86_400_000;

function engineOn(store: ReturnType<typeof createMemoryStore>, config: ConfigInput, ms: number) {
  let drawn = 0;
  const engine = createEngine({ config: defineConfig(config), store, clock: () => new Date(ms), newId: () => `id-${ms}-${drawn++}` });
  return { engine, drawn: () => drawn };
}

/**
 * Two metric achievements met, then (`later`) the second's threshold raised (the user keeps it: section 10)
 * and a composite of both added, which the user now meets.
 */
const composite = (later: boolean) =>
  ({
    metrics: [
      { key: 'lessons', name: 'Lessons' },
      { key: 'quizzes', name: 'Quizzes' },
    ],
    achievements: [
      { key: 'a1', name: 'A1', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
      { key: 'a2', name: 'A2', trigger: 'metric', metricKey: 'quizzes', metricValue: later ? 5 : 1 },
      ...(later ? [{ key: 'both', name: 'Both', trigger: 'achievement' as const, achievementKeys: ['a1', 'a2'] }] : []),
    ],
  }) satisfies ConfigInput;

it('getUserMetric and getUserMetrics show an added achievement the user already met, as getUserAchievements does', async () => {
  const cfg = (withAchievement: boolean): ConfigInput => ({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    achievements: withAchievement ? [{ key: 'three', name: 'Three', trigger: 'metric', metricKey: 'lessons', metricValue: 3 }] : [],
  });
  const store = createMemoryStore();
  await engineOn(store, cfg(false), T0).engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 });
  const { engine, drawn } = engineOn(store, cfg(true), T0 + DAY);
  const expected = (await engine.getUserAchievements('u', { includeIncomplete: true }))[0];
  expect(expected?.achievedAt).toBe(new Date(T0).toISOString());
  expect((await engine.getUserMetric('u', 'lessons')).achievements[0]).toEqual(expected);
  expect((await engine.getUserMetrics('u'))[0]?.achievements[0]).toEqual(expected);
  expect(drawn()).toBe(0);
});

it('reads show a composite achievement a changed configuration unlocks, with its points, as the next write commits it', async () => {
  const cfg = (later: boolean): ConfigInput => ({
    ...composite(later),
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: later ? [{ key: 'for-both', type: 'achievement' as const, achievementKey: 'both', points: 50 }] : [{ key: 'per', type: 'metric' as const, metricKey: 'lessons', metricThreshold: 1, points: 1 }] }],
  });
  const store = createMemoryStore();
  const a = engineOn(store, cfg(false), T0).engine;
  await a.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  await a.recordEvent('quizzes', { user: { id: 'u' }, value: 1 });
  const { engine, drawn } = engineOn(store, cfg(true), T0 + DAY);
  const held = async () => (await engine.getUserAchievements('u')).map((x) => `${x.key}@${x.achievedAt}`);
  const before = await held();
  expect(before).toContain(`both@${new Date(T0 + DAY).toISOString()}`);
  expect((await engine.getProfile('u')).achievements.find((x) => x.key === 'both')?.achievedAt).toBe(new Date(T0 + DAY).toISOString());
  const seen = await engine.getPointsSummary('u', 'xp');
  // Reads commit nothing and draw no ids; the same read twice gives the same award ids.
  expect(drawn()).toBe(0);
  expect((await engine.getPointsSummary('u', 'xp')).awards).toEqual(seen.awards);
  expect((await store.loadUser('u'))?.state.achievements.both).toBeUndefined();
  await engine.accrue('u');
  expect(await held()).toEqual(before);
  expect((await engine.getPointsSummary('u', 'xp')).total).toBe(seen.total);
});

it('a read does not raise what a write would refuse: a newly unlocked achievement whose blocking trigger would overdraw', async () => {
  const cfg = (later: boolean): ConfigInput => ({
    ...composite(later),
    streak: { frequency: 'daily' },
    leaderboards: [{ key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2026-01-01' }],
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: later ? [{ key: 'fee', type: 'achievement' as const, achievementKey: 'both', points: -5, blockIfOutOfPoints: true }] : [] }],
  });
  const store = createMemoryStore();
  const a = engineOn(store, cfg(false), T0).engine;
  await a.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  await a.recordEvent('quizzes', { user: { id: 'u' }, value: 1 });
  await a.recordEvent('lessons', { user: { id: 'v' }, value: 1 });
  const { engine } = engineOn(store, cfg(true), T0 + DAY / 2);
  // The user as they are, without the achievement the write would refuse.
  expect((await engine.getUserAchievements('u')).map((x) => x.key)).toEqual(['a1', 'a2']);
  expect((await engine.getUserMetric('u', 'lessons')).current).toBe(1);
  await engine.getProfile('u');
  expect((await engine.getLeaderboard('streaks')).rankings.map((r) => r.userId).sort()).toEqual(['u', 'v']);
  await expect(engine.accrue('u')).rejects.toMatchObject({ code: 'INSUFFICIENT_POINTS' });
});

it('a read lists due time grants where the write stores them: by date, older than stored awards after a changed schedule', async () => {
  const cfg = (every: number): ConfigInput => ({
    timeZone: 'UTC',
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    pointsSystems: [
      {
        key: 'coins',
        name: 'Coins',
        triggers: [
          { key: 'refill', type: 'time', timeUnit: 'day', timeInterval: every, points: 1 },
          { key: 'per', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
        ],
      },
    ],
  });
  const store = createMemoryStore();
  await engineOn(store, cfg(7), T0).engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  await engineOn(store, cfg(7), T0 + 3 * DAY).engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  // Daily now: three grants fell due between the two stored awards.
  const { engine } = engineOn(store, cfg(1), T0 + 3 * DAY + 3_600_000);
  const dates = async () => (await engine.getPointsSummary('u', 'coins')).awards.map((a) => `${a.date}${a.grants ? ` x${a.grants.count}` : ''}`);
  const read = await dates();
  expect(read).toEqual(['2026-03-05T10:00:00.000Z', '2026-03-03T00:00:00.000Z x3', '2026-03-02T10:00:00.000Z']);
  await engine.accrue('u');
  expect(await dates()).toEqual(read);
});
